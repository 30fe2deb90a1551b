package domxml

import (
	"strings"

	"github.com/beevik/etree"
)

// removeNamespace drops md's child elements in namespace uri (with the
// whitespace before each) and reports whether there were any.
func removeNamespace(md *etree.Element, uri string) bool {
	found := false
	for _, c := range md.ChildElements() {
		if c.NamespaceURI() == uri {
			removeWithIndent(md, c)
			found = true
		}
	}
	return found
}

// removeWithIndent removes child from parent together with the indentation
// text right before it.
func removeWithIndent(parent, child *etree.Element) {
	i := child.Index()
	if i > 0 {
		if cd, ok := parent.Child[i-1].(*etree.CharData); ok && strings.TrimSpace(cd.Data) == "" {
			parent.RemoveChildAt(i - 1)
		}
	}
	parent.RemoveChild(child)
	mergeText(parent)
}

// insertMetadata puts a new <metadata> where libvirt writes it: after
// <uuid> (or <title>/<description> when present), else first.
func insertMetadata(root, md *etree.Element) {
	at := -1
	for _, tag := range []string{"uuid", "title", "description"} {
		if e := root.SelectElement(tag); e != nil && e.Index() > at {
			at = e.Index()
		}
	}
	ws := leadingSpace(root)
	md.AddChild(newText(ws))
	root.InsertChildAt(at+1, md)
	root.InsertChildAt(at+1, newText(ws))
}

// indentChild appends el as the last child element of parent, indented one
// level deeper than parent.
func indentChild(parent, el *etree.Element) {
	inner := leadingSpace(parent.Parent()) + "  "
	if len(parent.ChildElements()) > 0 {
		inner = leadingSpace(parent)
	}
	tail := leadingSpace(parent.Parent())
	// Drop trailing whitespace, then add "\n<inner>" + el + "\n<tail>".
	for n := len(parent.Child); n > 0; n = len(parent.Child) {
		cd, ok := parent.Child[n-1].(*etree.CharData)
		if !ok || strings.TrimSpace(cd.Data) != "" {
			break
		}
		parent.RemoveChildAt(n - 1)
	}
	parent.AddChild(newText(inner))
	parent.AddChild(el)
	parent.AddChild(newText(tail))
	mergeText(parent)
}

// leadingSpace returns the whitespace text before e's first child element
// ("\n  " in an indented document), or "\n" when there is none.
func leadingSpace(e *etree.Element) string {
	if e == nil {
		return "\n"
	}
	for _, t := range e.Child {
		switch v := t.(type) {
		case *etree.CharData:
			if strings.TrimSpace(v.Data) == "" && strings.Contains(v.Data, "\n") {
				return v.Data
			}
		case *etree.Element:
			return "\n"
		}
	}
	return "\n"
}
