#!/usr/bin/env python3
"""Lists the Swift functions (func, init, deinit, subscript, accessors not included) longer than a limit.

    Scripts/long-functions.py [--limit N] [PATH ...]     # default: 70 lines, Sources

One line each, longest first: LINES  PATH:LINE  NAME, then the count. A function's length is its
lines from the declaration to its closing brace. A function longer than the limit that stays whole
says why in a comment containing "long-function:" just above it (or in its doc comment); those are
listed under "justified" and not counted. Exit status 0 (it reports; it does not fail).

The parser is small and knows Swift's comments, string literals (with interpolation, multi-line and
raw strings) and braces; Scripts/tests-without-expectation.py uses it too.
"""
import os
import re
import sys

DECL = re.compile(r'(?<![\w.])(func\s+([^\s(<]+)|init[?!]?\s*[(<]|deinit\s*\{|subscript\s*[(<])')


def code_mask(text):
    """The text with comments and string contents (not interpolations) blanked, newlines kept."""
    out = []
    i, n = 0, len(text)
    # A stack of contexts: 'code' with its paren depth for an interpolation, or a string kind.
    stack = [['code', 0]]
    while i < n:
        top = stack[-1]
        c = text[i]
        if top[0] == 'code':
            if text.startswith('//', i):
                j = text.find('\n', i)
                j = n if j < 0 else j
                out.append(' ' * (j - i)); i = j; continue
            if text.startswith('/*', i):
                depth, j = 1, i + 2
                while j < n and depth:
                    if text.startswith('/*', j): depth += 1; j += 2
                    elif text.startswith('*/', j): depth -= 1; j += 2
                    else: j += 1
                out.append(re.sub(r'[^\n]', ' ', text[i:j])); i = j; continue
            m = re.match(r'(#*)("""|")', text[i:i + 12])
            if m and (m.group(1) or c == '"'):
                hashes, quote = m.group(1), m.group(2)
                stack.append(['str', quote, hashes])
                out.append(' ' * len(m.group(0))); i += len(m.group(0)); continue
            if c == '(':
                top[1] += 1
            elif c == ')':
                if top[1] == 0 and len(stack) > 1:  # end of an interpolation
                    stack.pop(); out.append(' '); i += 1; continue
                top[1] -= 1
            out.append(c); i += 1; continue
        # inside a string
        _, quote, hashes = top
        if text.startswith('\\' + hashes + '(', i):
            stack.append(['code', 0])
            out.append(' ' * (len(hashes) + 2)); i += len(hashes) + 2; continue
        if text.startswith('\\' + hashes, i) and hashes == '' and i + 1 < n:
            out.append('  ' if text[i + 1] != '\n' else ' \n'); i += 2; continue
        if text.startswith(quote + hashes, i):
            stack.pop(); out.append(' ' * (len(quote) + len(hashes))); i += len(quote) + len(hashes); continue
        out.append('\n' if c == '\n' else ' '); i += 1
    return ''.join(out)


BODYLESS_NEXT = re.compile(r'\s*(func |var |let |static |public |internal |private |fileprivate |init|}|@|case |'
                           r'associatedtype |mutating |subscript|nonisolated |deinit|typealias |$)')


def functions(path):
    """(name, first line, last line, body start offset, body end offset) of every function in `path`."""
    text = open(path, encoding='utf-8').read()
    code = code_mask(text)
    line_of = [0] * (len(code) + 1)
    line = 1
    for k, ch in enumerate(code):
        line_of[k] = line
        if ch == '\n': line += 1
    line_of[len(code)] = line
    found = []
    for m in DECL.finditer(code):
        name = m.group(2) or m.group(1).split('(')[0].split('<')[0].strip(' {')
        # The body: the first `{` outside parentheses/brackets, unless the declaration ends first
        # (a protocol requirement).
        j, depth = m.end() - (1 if code[m.end() - 1] in '({<' else 0), 0
        start = None
        while j < len(code):
            ch = code[j]
            if ch in '([': depth += 1
            elif ch in ')]': depth -= 1
            elif ch == '{' and depth == 0: start = j; break
            elif ch == '}' and depth == 0: break
            elif ch == '\n' and depth == 0:
                rest = code[j + 1:j + 200]
                if BODYLESS_NEXT.match(rest) and not re.match(r'\s*(throws|rethrows|async|->|where|\{)', rest):
                    break
            j += 1
        if start is None: continue
        depth, j = 0, start
        while j < len(code):
            if code[j] == '{': depth += 1
            elif code[j] == '}':
                depth -= 1
                if depth == 0: break
            j += 1
        found.append((name, line_of[m.start()], line_of[j], start, j, text))
    return found


def swift_files(paths):
    for root in paths:
        if os.path.isfile(root):
            yield root; continue
        for directory, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if not d.startswith('.'))
            for f in sorted(files):
                if f.endswith('.swift'): yield os.path.join(directory, f)


def justified(text, first_line):
    lines = text.split('\n')
    k = first_line - 2
    while k >= 0 and (lines[k].strip().startswith(('//', '@')) or lines[k].strip() == ''):
        if 'long-function:' in lines[k]: return True
        if lines[k].strip() == '': break
        k -= 1
    return False


def main(argv):
    limit = 70
    if argv[:1] == ['--limit']:
        limit = int(argv[1]); argv = argv[2:]
    paths = argv or ['Sources']
    long, ok = [], []
    for path in swift_files(paths):
        for name, first, last, _, _, text in functions(path):
            length = last - first + 1
            if length > limit:
                (ok if justified(text, first) else long).append((length, f'{path}:{first}', name))
    for length, where, name in sorted(long, key=lambda x: (-x[0], x[1])):
        print(f'{length:5d}  {where}  {name}')
    print(f'{len(long)} functions over {limit} lines')
    if ok:
        print('justified:')
        for length, where, name in sorted(ok, key=lambda x: (-x[0], x[1])):
            print(f'{length:5d}  {where}  {name}')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
