#!/usr/bin/env python3
"""Lists the tests that expect nothing: no #expect, #require, Issue.record, XCTAssert... or XCTFail in
their body, and no call of a function (of the test sources) that has one, directly or further down.

    Scripts/tests-without-expectation.py [PATH ...]     # default: Tests

One line a test (PATH:LINE NAME), then the count. Exit status 1 when there is any, else 0.
Uses the parser of Scripts/long-functions.py.
"""
import importlib.util
import os
import re
import sys

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location('long_functions', os.path.join(here, 'long-functions.py'))
lf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lf)

EXPECTATION = re.compile(r'#expect\b|#require\b|\bIssue\.record\b|\bXCTAssert\w*\s*\(|\bXCTFail\s*\(|\bXCTUnwrap\s*\(')


def test_lines(code):
    """The lines of the `func` declarations that carry @Test (with arguments over any lines)."""
    lines = set()
    for m in re.finditer(r'@Test\b', code):
        j, depth = m.end(), 0
        while j < len(code):
            if code[j] == '(': depth += 1
            elif code[j] == ')': depth -= 1
            elif depth == 0 and not code[j].isspace(): break
            j += 1
        while True:  # other attributes and modifiers
            rest = re.match(r'(@\w+(\([^)]*\))?|static|public|internal|private|mutating|nonisolated)\s+', code[j:])
            if not rest: break
            j += rest.end()
        if code.startswith('func', j): lines.add(code.count('\n', 0, j) + 1)
    return lines


def main(argv):
    paths = argv or ['Tests']
    everything = []  # (path, name, first line, body code, whether a test)
    for path in lf.swift_files(paths):
        text = open(path, encoding='utf-8').read()
        code = lf.code_mask(text)
        tests = test_lines(code)
        for name, first, _, start, end, _ in lf.functions(path):
            # Macros are kept by the mask (they are code), so the masked body is what runs.
            everything.append((path, name, first, code[start:end + 1], first in tests or (name.startswith('test') and 'XCTestCase' in code)))
    # Functions that expect something, directly or through a function that does (to a fixed point).
    expecting = {name for _, name, _, body, _ in everything if EXPECTATION.search(body)}
    while True:
        calls = re.compile(r'(?<![\w])(' + '|'.join(map(re.escape, sorted(expecting))) + r')\s*[({]') if expecting else None
        grown = {name for _, name, _, body, _ in everything
                 if name not in expecting and calls and calls.search(body)}
        if not grown: break
        expecting |= grown
    missing, tests = [], 0
    for path, name, first, body, is_test in everything:
        if not is_test: continue
        tests += 1
        if EXPECTATION.search(body): continue
        if calls and calls.search(body): continue
        missing.append(f'{path}:{first} {name}')
    for line in missing: print(line)
    print(f'{len(missing)} of {tests} tests without an expectation')
    return 1 if missing else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
