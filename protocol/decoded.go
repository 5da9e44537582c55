package protocol

import (
	"errors"
	"fmt"
	"reflect"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// A frame's bytes are not what decoding it costs: every repeated message
// becomes a Go struct of its own, every string a copy, every list a slice
// grown by appends. An empty ShardRecord is two bytes on the wire and
// about a hundred on the heap, so a 16 MiB frame of them would decode into
// some 900 MiB while its reader had reserved 16. DecodedBytes bounds what
// decoding a frame allocates and keeps, from its bytes and its message's
// schema, without decoding it, so that a reader reserves it before it
// decodes (ReadMsgBudget) and a frame that would decode into more than its
// budget allows is refused unread.

// errTooDeep reports a frame whose messages nest deeper than maxNesting.
var errTooDeep = errors.New("messages nested too deep")

// maxNesting bounds how deep messages nest in a frame: the deepest chain
// of the wire messages is a few levels, and anything deeper is hostile.
const maxNesting = 32

// Go's sizes of what decoding allocates besides the structs themselves:
// a pointer (a list's element of message kind), a string header, a
// slice header, and the struct that wraps a oneof's value.
const (
	ptrSize      = 8
	stringHeader = 16
	sliceHeader  = 24
	oneofWrapper = 32
)

// DecodedBytes returns an upper bound of the heap that decoding body as a
// message of descriptor md allocates and keeps: its structs, strings,
// bytes, lists (at up to twice their length, as appends grow them) and
// unknown fields, each rounded up as Go's allocator rounds it. It reads
// the wire format only, and fails on a malformed frame, which decoding
// would refuse too.
func DecodedBytes(body []byte, md protoreflect.MessageDescriptor) (int, error) {
	return decodedBytes(body, md, 0)
}

func decodedBytes(b []byte, md protoreflect.MessageDescriptor, depth int) (int, error) {
	return schemaOf(md).bytes(b, depth)
}

// A schema is what DecodedBytes needs of a message's descriptor, looked
// up once per message type: a frame's walk costs a fraction of decoding it.
type schema struct {
	md     protoreflect.MessageDescriptor
	size   int            // the Go struct's size, as allocated
	fields []*fieldSchema // by field number; nil for an unknown number
}

// A fieldSchema describes one field of a message.
type fieldSchema struct {
	fd        protoreflect.FieldDescriptor
	wire      protowire.Type // the wire type of one value (BytesType for packed lists too)
	list      bool
	message   bool // of message kind: sub is its schema
	delimited bool // a string or bytes
	packable  bool // a list of scalars, which may come packed
	slot      int  // the size of a list's element slot
	wrapper   int  // the oneof wrapper decoding allocates, or 0
	sub       protoreflect.MessageDescriptor
}

// maxFieldTable bounds the field numbers a schema's table covers; the
// wire messages number their fields far below it.
const maxFieldTable = 1024

// schemas caches each message's schema by its full name.
var schemas sync.Map // protoreflect.FullName -> *schema

// schemaOf returns md's schema.
func schemaOf(md protoreflect.MessageDescriptor) *schema {
	if v, ok := schemas.Load(md.FullName()); ok {
		return v.(*schema)
	}
	s := &schema{md: md, size: alloc(structSize(md))}
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if int(fd.Number()) >= maxFieldTable {
			continue // counted as unknown: more than decoding keeps
		}
		f := &fieldSchema{fd: fd, list: fd.IsList()}
		switch fd.Kind() {
		case protoreflect.MessageKind:
			f.message, f.wire, f.sub, f.slot = true, protowire.BytesType, fd.Message(), ptrSize
		case protoreflect.GroupKind:
			f.message, f.wire, f.sub, f.slot = true, protowire.StartGroupType, fd.Message(), ptrSize
		case protoreflect.StringKind:
			f.delimited, f.wire, f.slot = true, protowire.BytesType, stringHeader
		case protoreflect.BytesKind:
			f.delimited, f.wire, f.slot = true, protowire.BytesType, sliceHeader
		case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
			f.wire, f.slot = protowire.Fixed32Type, 4
		case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
			f.wire, f.slot = protowire.Fixed64Type, 8
		case protoreflect.BoolKind:
			f.wire, f.slot = protowire.VarintType, 1
		case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Uint32Kind, protoreflect.EnumKind:
			f.wire, f.slot = protowire.VarintType, 4
		default:
			f.wire, f.slot = protowire.VarintType, 8
		}
		f.packable = f.list && !f.message && !f.delimited
		if o := fd.ContainingOneof(); o != nil && !o.IsSynthetic() {
			f.wrapper = alloc(oneofWrapper)
		}
		for len(s.fields) <= int(fd.Number()) {
			s.fields = append(s.fields, nil)
		}
		s.fields[fd.Number()] = f
	}
	v, _ := schemas.LoadOrStore(md.FullName(), s)
	return v.(*schema)
}

// bytes is the heap that decoding b as a message of s keeps.
func (s *schema) bytes(b []byte, depth int) (int, error) {
	if depth > maxNesting {
		return 0, fmt.Errorf("%s: %w (over %d levels)", s.md.FullName(), errTooDeep, maxNesting)
	}
	total := s.size
	unknown := 0
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, fmt.Errorf("%s: %w", s.md.FullName(), protowire.ParseError(n))
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return 0, fmt.Errorf("%s field %d: %w", s.md.FullName(), num, protowire.ParseError(m))
		}
		value := b[n : n+m]
		b = b[n+m:]
		var f *fieldSchema
		if int(num) < len(s.fields) {
			f = s.fields[num]
		}
		if f == nil || typ != f.wire && !(f.packable && typ == protowire.BytesType) {
			// Kept as unknown fields: its bytes, appended to a slice.
			unknown += n + m
			continue
		}
		cost, err := f.bytes(typ, value, depth)
		if err != nil {
			return 0, err
		}
		total += cost
	}
	if unknown > 0 {
		total += alloc(2 * unknown)
	}
	return total, nil
}

// bytes is the heap one occurrence of the field costs, its wire value
// (without the tag) being value of wire type typ.
func (f *fieldSchema) bytes(typ protowire.Type, value []byte, depth int) (int, error) {
	switch {
	case f.message:
		var sub []byte
		if typ == protowire.BytesType {
			sub, _ = protowire.ConsumeBytes(value)
		} else {
			// A group's value ends with its end tag.
			sub, _ = protowire.ConsumeGroup(f.fd.Number(), value)
		}
		cost, err := schemaOf(f.sub).bytes(sub, depth+1)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", f.fd.FullName(), err)
		}
		if f.list {
			cost += 2 * f.slot
		}
		return cost + f.wrapper, nil
	case f.delimited:
		v, _ := protowire.ConsumeBytes(value)
		cost := alloc(len(v))
		if f.list {
			cost += 2 * f.slot
		}
		return cost + f.wrapper, nil
	case f.packable && typ == protowire.BytesType:
		// A packed list of scalars: its elements, each in a slot of a
		// slice that may be twice as long as the list.
		count, err := packedCount(f.fd, value)
		if err != nil {
			return 0, err
		}
		return alloc(2 * count * f.slot), nil
	case f.list:
		return 2 * f.slot, nil
	default:
		return f.wrapper, nil
	}
}

// packedCount is the number of elements of a packed list of fd's kind.
func packedCount(fd protoreflect.FieldDescriptor, value []byte) (int, error) {
	b, n := protowire.ConsumeBytes(value)
	if n < 0 {
		return 0, fmt.Errorf("%s: %w", fd.FullName(), protowire.ParseError(n))
	}
	switch fd.Kind() {
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return len(b) / 4, nil
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return len(b) / 8, nil
	}
	count := 0
	for len(b) > 0 {
		_, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return 0, fmt.Errorf("%s: %w", fd.FullName(), protowire.ParseError(n))
		}
		b = b[n:]
		count++
	}
	return count, nil
}

// structSize is the size of the Go struct of messages of descriptor md,
// or a generous guess for a message without a registered Go type (the
// schema that asks keeps it).
func structSize(md protoreflect.MessageDescriptor) int {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
	if err != nil {
		return 64 + 32*md.Fields().Len()
	}
	t := reflect.TypeOf(mt.Zero().Interface())
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return int(t.Size())
}

// alloc is what Go's allocator takes for an object of n bytes: at least
// 16 bytes, and at most an eighth more than asked for beyond that (its
// size classes), plus a word of slack.
func alloc(n int) int {
	if n == 0 {
		return 0
	}
	return max(16, n+n/8+8)
}
