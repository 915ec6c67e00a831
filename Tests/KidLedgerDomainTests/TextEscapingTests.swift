import Testing
import KidLedgerDomain

@Suite struct TextEscapingTests {
    @Test func jsonStrings() {
        #expect(TextEscaping.jsonString("Ava \"A\" \\ é\n\t\r\u{1}") == "\"Ava \\\"A\\\" \\\\ é\\n\\t\\r\\u0001\"")
        #expect(TextEscaping.jsonString("") == "\"\"")
    }

    @Test func xmlText() {
        #expect(TextEscaping.xml("<a href=\"x\">Tom & Jerry's</a>") == "&lt;a href=&quot;x&quot;&gt;Tom &amp; Jerry&apos;s&lt;/a&gt;")
    }
}
