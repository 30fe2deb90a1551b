package domxml

import (
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/beevik/etree"
)

// etreeTree reads s with etree's reader as parse's fallback does, and
// reports whether that reader and the strict scan both accept it.
func etreeTree(s string) (*etree.Document, bool) {
	doc := etree.NewDocument()
	doc.ReadSettings.PreserveDuplicateAttrs = true
	doc.ReadSettings.CharsetReader = refuseCharset
	if err := doc.ReadFromString(s); err != nil || !treeWellFormed(doc) || wellFormed(s) != nil {
		return nil, false
	}
	return doc, true
}

// dumpTree writes every node of a tree with what etree keeps of it: names,
// attributes (and the element each points back to), text with its flags,
// and each child's parent and index.
func dumpTree(b *strings.Builder, el *etree.Element, depth int) {
	fmt.Fprintf(b, "%*s<%q %q", depth, "", el.Space, el.Tag)
	for _, a := range el.Attr {
		fmt.Fprintf(b, " [%q %q %q own=%v]", a.Space, a.Key, a.Value, a.Element() == el)
	}
	b.WriteString(">\n")
	for i, t := range el.Child {
		if t.Parent() != el || t.Index() != i {
			fmt.Fprintf(b, "%*s!parent/index %d\n", depth+1, "", t.Index())
		}
		switch t := t.(type) {
		case *etree.Element:
			dumpTree(b, t, depth+1)
		case *etree.CharData:
			fmt.Fprintf(b, "%*stext %q ws=%v cdata=%v\n", depth+1, "", t.Data, t.IsWhitespace(), t.IsCData())
		case *etree.Comment:
			fmt.Fprintf(b, "%*scomment %q\n", depth+1, "", t.Data)
		case *etree.ProcInst:
			fmt.Fprintf(b, "%*spi %q %q\n", depth+1, "", t.Target, t.Inst)
		case *etree.Directive:
			fmt.Fprintf(b, "%*sdirective %q\n", depth+1, "", t.Data)
		default:
			fmt.Fprintf(b, "%*s%T\n", depth+1, "", t)
		}
	}
}

// treesDiffer compares fastTree with etree's reader on s: whatever fastTree
// reads, the strict readers must accept, into the same tree.
func treesDiffer(s string) (fast bool, diff string) {
	got, ok := fastTree(s)
	if !ok {
		return false, ""
	}
	want, ok := etreeTree(s)
	if !ok {
		return true, "fastTree read a document the strict readers refuse"
	}
	var g, w strings.Builder
	dumpTree(&g, &got.Element, 0)
	dumpTree(&w, &want.Element, 0)
	if g.String() != w.String() {
		return true, fmt.Sprintf("fastTree:\n%s\netree:\n%s", g.String(), w.String())
	}
	if gs, err := serialize(got); err != nil || gs != mustSerialize(want) {
		return true, fmt.Sprintf("serialised differently: %q (%v)", gs, err)
	}
	// serialize writes what etree's own WriteToString writes
	if ws, err := want.WriteToString(); err != nil || ws != mustSerialize(want) {
		return true, fmt.Sprintf("serialize wrote %q, WriteToString %q (%v)", mustSerialize(want), ws, err)
	}
	return true, ""
}

func mustSerialize(doc *etree.Document) string {
	s, err := serialize(doc)
	if err != nil {
		return "error: " + err.Error()
	}
	return s
}

// testDefinitions reads every testdata/*.xml, by file name.
func testDefinitions(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.xml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no test definitions: %v", err)
	}
	defs := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		defs[filepath.Base(f)] = string(b)
	}
	return defs
}

// TestFastTreeAgreesWithEtree holds fastTree to etree's reader: on every
// test definition and on plain XML of each shape it reads, the trees are
// the same; on each shape it leaves to etree it gives up (and parse still
// answers as before, which TestCheckDomainAgreesWithParse covers).
func TestFastTreeAgreesWithEtree(t *testing.T) {
	read := testDefinitions(t)
	for name, x := range map[string]string{
		"entities":            "<domain a='&lt;&gt;&amp;&apos;&quot;' b=\"'\"><name>x&amp;y &lt;z&gt;</name></domain>",
		"comments":            "<!-- top --><domain><!-- in - x --><name>a<!--b-->c</name></domain><!---->",
		"whitespace":          " \n\t<domain>\n  <name>a</name>\n\t</domain>\n",
		"prefixes":            "<domain xmlns:q='urn:q' q:a='1'><q:x q:y='2'/></domain>",
		"self-closed":         "<domain><a/><b x='1'/><c x='1' /></domain>",
		"end tag with space":  "<domain><a></a ></domain >",
		"newlines in values":  "<domain a='x\ny\tz'/>",
		"non-ASCII text":      "<domain><description>grüße ✓ 🚀</description></domain>",
		"greater-than text":   "<domain>a > b</domain>",
		"names with digits":   "<domain><a-1.b_2 c-3='x'/></domain>",
		"DEL and high ASCII":  "<domain a='\x7f'>\x7f</domain>",
		"not a domain":        "<network/>",
		"two roots":           "<domain/><domain/>",
		"recipe-like element": "<domain><metadata><vmpayload:recipe xmlns:vmpayload='https://vmpayload.dev/recipe/1'>{\"version\":1,\"hostname\":\"h &amp; &lt;x&gt;\"}</vmpayload:recipe></metadata></domain>",
	} {
		read[name] = x
	}
	for name, x := range read {
		t.Run(name, func(t *testing.T) {
			fast, d := treesDiffer(x)
			if !fast {
				t.Fatal("fastTree gave up on plain XML")
			}
			if d != "" {
				t.Fatal(d)
			}
		})
	}

	for name, x := range map[string]string{
		"declaration":               "<?xml version='1.0'?><domain/>",
		"processing instruction":    "<domain><?pi x?></domain>",
		"doctype":                   "<!DOCTYPE domain><domain/>",
		"cdata":                     "<domain><![CDATA[x]]></domain>",
		"character reference":       "<domain>&#65;</domain>",
		"other entity":              "<domain>&nbsp;</domain>",
		"bare ampersand":            "<domain>a & b</domain>",
		"carriage return":           "<domain>\r\n</domain>",
		"carriage return in tag":    "<domain\r\n/>",
		"control character":         "<domain>\x01</domain>",
		"invalid UTF-8":             "<domain>\xff</domain>",
		"U+FFFE":                    "<domain>\uFFFE</domain>",
		"cdata end in text":         "<domain>]]></domain>",
		"attribute twice":           "<domain a='1' a='2'/>",
		"space around equals":       "<domain a = '1'/>",
		"unquoted value":            "<domain a=1/>",
		"no space between attrs":    "<domain a='1'b='2'/>",
		"lt in value":               "<domain a='<'/>",
		"text outside root":         "x<domain/>",
		"unclosed":                  "<domain><a>",
		"mismatched":                "<domain><a></b></domain>",
		"end tag outside":           "<domain/></domain>",
		"two colons":                "<a:b:c/>",
		"empty prefix":              "<:a/>",
		"empty local":               "<a:/>",
		"digit first":               "<1a/>",
		"non-ASCII name":            "<dömain/>",
		"double dash in comment":    "<domain><!-- a -- b --></domain>",
		"comment ending in dash":    "<domain><!-- a ---></domain>",
		"unterminated comment":      "<domain><!-- a </domain>",
		"control char in comment":   "<domain><!-- \x01 --></domain>",
		"byte order mark":           "\uFEFF<domain/>",
		"lone lt":                   "<domain><</domain>",
		"too deep":                  strings.Repeat("<a>", fastMaxDepth+1) + strings.Repeat("</a>", fastMaxDepth+1),
		"attribute without a value": "<domain a/>",
	} {
		t.Run("gives up: "+name, func(t *testing.T) {
			if _, ok := fastTree(x); ok {
				t.Fatal("fastTree read it")
			}
		})
	}
}

// TestTreeVisitAgreesWithScan checks that visiting a tree tells the
// visitor what the scan of the same document tells it.
func TestTreeVisitAgreesWithScan(t *testing.T) {
	for _, f := range []string{"pc.xml", "q35.xml", "aarch64.xml", "live-qemu.xml"} {
		b, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		x := string(b)
		if d := visitsDiffer(x); d != "" {
			t.Errorf("%s: %s", f, d)
		}
	}
	if d := visitsDiffer("<domain xmlns:q='u'><q:devices><channel type='unix'><source mode='bind' path='/p'/><target type='virtio' name='n'/></channel></q:devices></domain>"); d != "" {
		t.Error(d)
	}
}

// visitsDiffer records the visits of x by the scan and by treeVisit of its
// fast tree and returns how they differ ("" when they do not, or when
// fastTree does not read x).
func visitsDiffer(x string) string {
	doc, ok := fastTree(x)
	if !ok {
		return ""
	}
	root := soleDomainRoot(doc)
	if root == nil {
		return ""
	}
	record := func(b *strings.Builder) visitor {
		return func(open []xml.Name, start *xml.StartElement) {
			fmt.Fprintf(b, "%v", open)
			if start != nil {
				fmt.Fprintf(b, " %v %v", start.Name, start.Attr)
			}
			b.WriteString("\n")
		}
	}
	var scanned, visited strings.Builder
	if _, _, err := scanVisit(x, record(&scanned)); err != nil {
		return fmt.Sprintf("scan refused what fastTree read: %v", err)
	}
	treeVisit(root, record(&visited), nil, nil)
	if scanned.String() != visited.String() {
		return fmt.Sprintf("scan:\n%s\ntree:\n%s", scanned.String(), visited.String())
	}
	return ""
}
