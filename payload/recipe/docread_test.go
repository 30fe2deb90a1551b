package recipe

import (
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/payload/job"
)

// TestFromDomainXMLEdges pins how a recipe is read from unusual forms
// (namespaces, prefixes, comments, CDATA, stray text) and what a
// definition that is not well-formed gives: the results and messages of
// the token scanner that read recipes before the domain Document.
func TestFromDomainXMLEdges(t *testing.T) {
	dir := t.TempDir()
	r, res := build(t, &job.Job{Version: 1, Hostname: "h"}, dir, "")
	rc, _ := New(r, res)
	el, _ := rc.render(nil, true)
	jobEl := el[strings.Index(el, "<vmpayload:job>"):strings.Index(el, "</vmpayload:recipe>")]
	js, _ := rc.jobJSON()
	swap := func(old, new string) string { return domainXML(strings.Replace(el, old, new, 1)) }
	for i, c := range []struct {
		xml   string
		found bool
		err   string
	}{
		{swap(jobEl, jobEl+"<u:x/>"), false, `recipe x: unexpected element (namespace "u") in the recipe`},
		{swap(jobEl, jobEl+"<x/>"), false, `recipe x: unexpected element (namespace "") in the recipe`},
		{swap(` label="cidata"`, ` label="cidata" xml:lang="en"`), false, `recipe image@lang: unknown attribute (namespace "http://www.w3.org/XML/1998/namespace")`},
		{swap(` label="cidata"`, ` label="cidata" u:k="en"`), false, `recipe image@k: unknown attribute (namespace "u")`},
		{swap(` version="1"`, ` version="1" xml:lang="en"`), false, `recipe recipe@lang: unknown attribute`},
		{swap(jobEl, "<vmpayload:job>"+xmlEscape(string(js[:10]))+"<!-- c -->"+"<![CDATA["+string(js[10:])+"]]></vmpayload:job>"), true, ``},
		{swap(jobEl, jobEl+"<!-- c --><?pi x?> \n"), true, ``},
		{swap(jobEl, jobEl+" a <!-- c --> b"), false, `recipe recipe: unexpected text " a "`},
		{swap("<vmpayload:image", "<vmpayload:image>x</vmpayload:image><vmpayload:image"), false, `recipe image@path: missing`},
		{swap("/>", "> t </vmpayload:image>"), false, `recipe image: unexpected text " t "`},
		{swap("/>", "><!--c--></vmpayload:image>"), true, ``},
		{swap("/>", "><b/></vmpayload:image>"), false, `recipe image: unexpected element <b>`},
		{swap("<vmpayload:job>", "<vmpayload:job a='1'>"), false, `recipe job@a: unknown attribute`},
		{swap("<vmpayload:job>", "<vmpayload:job xmlns:q='u'>"), true, ``},
		{"<domain><metadata><recipe xmlns='" + Namespace + "' version='1'/></metadata></domain>", false, `recipe image: missing`},
		{"<domain><metadata xmlns='urn:x'>" + el + "</metadata></domain>", false, ``},
		{"<domain><q:metadata xmlns:q='urn:q'>" + el + "</q:metadata></domain>", false, ``},
		{"<domain><metadata><x:other xmlns:x='" + Namespace + "'/></metadata></domain>", false, `recipe other: unknown element in the recipe namespace`},
		{"<domain><metadata>" + el + "</metadata><metadata>" + el + "</metadata></domain>", false, `recipe recipe: the domain's metadata holds more than one recipe`},
		{"<domain><metadata><r:recipe xmlns:r='" + Namespace + "' version='1' r:version='1'/></metadata></domain>", false, `recipe recipe@version: unknown attribute`},
		{"<domain/><domain/>", false, ``},
		{"<domain/>x", false, ``},
		{"<domain a='1' a='2'/>", false, ``},
		{"<domain></name>", false, `reading the domain XML: XML syntax error on line 1: element <domain> closed by </name>`},
		{"<?xml version='1.0' encoding='ISO-8859-1'?><domain/>", false, `reading the domain XML: xml: encoding "ISO-8859-1" declared but Decoder.CharsetReader is nil`},
		{"", false, ``},
		{"<domain>&x;</domain>", false, `reading the domain XML: XML syntax error on line 1: invalid character entity &x;`},
	} {
		_, ok, err := FromDomainXML(c.xml)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if ok != c.found || got != c.err {
			t.Errorf("%d: found %v, err %q; want %v, %q\n%s", i, ok, got, c.found, c.err, c.xml)
		}
	}
}
