package protocol_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// docPath is the protocol reference this test keeps complete.
const docPath = "../docs/protocol.md"

// protocolIDs are the string constants of ids.go, each with what the
// document must show for it. TestDocListsEveryIDConstant makes sure this
// list names every one of them, so a new ID cannot be left out.
var protocolIDs = []struct {
	name string // the constant's name in ids.go
	row  string // must start a table row as `row`
}{
	{"RingID", protocol.RingID},
	{"TasksID", protocol.TasksID},
	{"SeedID", protocol.SeedID},
	{"ReplicateID", protocol.ReplicateID},
	{"HandoffID", protocol.HandoffID},
	{"DigestID", protocol.DigestID},
	{"PullID", protocol.PullID},
	{"FetchID", protocol.FetchID},
	{"ArchiveID", protocol.ArchiveID},
	{"GetID", protocol.GetID},
	{"CaptureID", protocol.CaptureID},
	{"StatusID", protocol.StatusID},
	// The DHT's protocol is its prefix followed by the Kademlia suffix.
	{"DHTPrefix", protocol.DHTPrefix + "/kad/1.0.0"},
	{"Rendezvous", ""}, // mentioned, not a protocol of its own: see below
}

func readDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatalf("read %s: %v", docPath, err)
	}
	return string(b)
}

// section is the text under one heading of the document, up to the next
// heading of any level.
type section struct {
	heading string
	lines   []string
}

var messageHeading = regexp.MustCompile("^#{2,4} `([A-Za-z][A-Za-z0-9]*)`$")

// messageSections returns the sections whose heading is a message name
// alone, as in "### `Peer`", by name.
func messageSections(t *testing.T, doc string) map[string]section {
	t.Helper()
	out := map[string]section{}
	var cur *section
	var curName string
	flush := func() {
		if cur != nil {
			if _, dup := out[curName]; dup {
				t.Errorf("%s: message %s is documented twice", docPath, curName)
			}
			out[curName] = *cur
		}
		cur = nil
	}
	inCode := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(line, "#") {
			if cur != nil {
				cur.lines = append(cur.lines, line)
			}
			continue
		}
		flush()
		if m := messageHeading.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			curName = m[1]
			cur = &section{heading: line}
		}
	}
	flush()
	return out
}

// fieldRow is one row of a message's field table:
// | # | `name` | `type` | meaning | bounds and checks |
type fieldRow struct {
	number, typ, meaning, checks string
	line                         string
}

var backticked = regexp.MustCompile("`([^`]+)`")

// fieldRows parses the field table of a section by field name.
func fieldRows(t *testing.T, msg string, s section) map[string]fieldRow {
	t.Helper()
	rows := map[string]fieldRow{}
	for _, line := range s.lines {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if len(cells) < 2 {
			continue
		}
		name, ok := strings.CutPrefix(cells[1], "`")
		if !ok || !strings.HasSuffix(name, "`") {
			continue // the header or the separator
		}
		name = strings.TrimSuffix(name, "`")
		if len(cells) != 5 {
			t.Errorf("%s: %s.%s: want 5 cells (#, field, type, meaning, checks), got %d: %s", docPath, msg, name, len(cells), line)
			continue
		}
		if _, dup := rows[name]; dup {
			t.Errorf("%s: %s.%s is listed twice", docPath, msg, name)
		}
		typ := ""
		if m := backticked.FindStringSubmatch(cells[2]); m != nil {
			typ = m[1]
		}
		rows[name] = fieldRow{number: cells[0], typ: typ, meaning: cells[3], checks: cells[4], line: line}
	}
	return rows
}

// typeName is a field's protobuf type as the .proto file spells it.
func typeName(f protoreflect.FieldDescriptor) string {
	var base string
	switch f.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		base = string(f.Message().Name())
	case protoreflect.EnumKind:
		base = string(f.Enum().Name())
	default:
		base = f.Kind().String()
	}
	if f.IsList() {
		return "repeated " + base
	}
	return base
}

// TestDocDocumentsEveryMessageField checks docs/protocol.md against the
// generated descriptors: every message has its own section, whose table
// has one row per field with the field's number and type and a meaning,
// and no row for a field the message does not have.
func TestDocDocumentsEveryMessageField(t *testing.T) {
	doc := readDoc(t)
	sections := messageSections(t, doc)
	msgs := pb.File_pb_swarmcrawl_proto.Messages()
	if msgs.Len() == 0 {
		t.Fatal("no messages in the descriptor")
	}
	want := map[string][]string{} // message → field names
	for i := 0; i < msgs.Len(); i++ {
		m := msgs.Get(i)
		name := string(m.Name())
		fields := m.Fields()
		want[name] = []string{}
		for j := 0; j < fields.Len(); j++ {
			want[name] = append(want[name], string(fields.Get(j).Name()))
		}
	}

	for i := 0; i < msgs.Len(); i++ {
		m := msgs.Get(i)
		name := string(m.Name())
		s, ok := sections[name]
		if !ok {
			t.Errorf("%s: message %s has no section (a heading \"### `%s`\")", docPath, name, name)
			continue
		}
		rows := fieldRows(t, name, s)
		if len(want[name]) == 0 && !strings.Contains(strings.Join(s.lines, "\n"), "No fields") {
			t.Errorf("%s: message %s has no fields: its section must say \"No fields\"", docPath, name)
		}
		for _, fname := range want[name] {
			row, ok := rows[fname]
			if !ok {
				t.Errorf("%s: %s.%s is not documented (a row \"| n | `%s` | `type` | meaning | checks |\" in the section of %s)", docPath, name, fname, fname, name)
				continue
			}
			f := m.Fields().ByName(protoreflect.Name(fname))
			if f == nil {
				t.Errorf("%s: %s.%s is not in the descriptor", docPath, name, fname)
				continue
			}
			if row.number != strconv.Itoa(int(f.Number())) {
				t.Errorf("%s: %s.%s: number %q, the .proto says %d", docPath, name, fname, row.number, f.Number())
			}
			if want := typeName(f); row.typ != want {
				t.Errorf("%s: %s.%s: type %q, the .proto says %q", docPath, name, fname, row.typ, want)
			}
			if row.meaning == "" {
				t.Errorf("%s: %s.%s: no meaning given", docPath, name, fname)
			}
			if o := f.ContainingOneof(); o != nil && !o.IsSynthetic() {
				if !strings.Contains(row.meaning, "oneof `"+string(o.Name())+"`") {
					t.Errorf("%s: %s.%s: does not say it is in oneof `%s`", docPath, name, fname, o.Name())
				}
			}
		}
		for fname, row := range rows {
			if !slices.Contains(want[name], fname) {
				t.Errorf("%s: %s has no field %s, yet the document lists it: %s", docPath, name, fname, row.line)
			}
		}
	}
	for name, s := range sections {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: section %q documents %s, which is not a message of the .proto", docPath, strings.TrimSpace(s.heading), name)
		}
	}
}

// TestDocListsEveryProtocolID checks that every protocol ID starts a row
// of a table, and that the DHT's prefix and rendezvous namespace are named.
func TestDocListsEveryProtocolID(t *testing.T) {
	doc := readDoc(t)
	for _, id := range protocolIDs {
		if id.row == "" {
			continue
		}
		if !strings.Contains(doc, "\n| `"+id.row+"` |") {
			t.Errorf("%s: protocol ID %s = %q is not in a table row (\"| `%s` | …\")", docPath, id.name, id.row, id.row)
		}
	}
	for name, v := range map[string]string{"DHTPrefix": protocol.DHTPrefix, "Rendezvous": protocol.Rendezvous} {
		if !strings.Contains(doc, "`"+v+"`") {
			t.Errorf("%s: %s = %q is not mentioned as `%s`", docPath, name, v, v)
		}
	}
}

// TestDocListsEveryIDConstant makes sure protocolIDs names every string
// constant of ids.go: a new protocol ID must be added there, and so to the
// document.
func TestDocListsEveryIDConstant(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "ids.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var consts []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						consts = append(consts, n.Name)
					}
				}
			}
		}
	}
	if len(consts) == 0 {
		t.Fatal("no string constants found in ids.go")
	}
	for _, c := range consts {
		if !slices.ContainsFunc(protocolIDs, func(id struct{ name, row string }) bool { return id.name == c }) {
			t.Errorf("ids.go declares %s, which protocolIDs in doc_test.go does not list", c)
		}
	}
	for _, id := range protocolIDs {
		if !slices.Contains(consts, id.name) {
			t.Errorf("protocolIDs lists %s, which ids.go does not declare", id.name)
		}
	}
}
