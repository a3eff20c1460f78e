package results

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSchemaDocumented checks that docs/results.schema.json names every field of Results, at
// every depth, and no field Results lacks: a field added to one and not the other fails here.
func TestSchemaDocumented(t *testing.T) {
	data, err := os.ReadFile("../../docs/results.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatalf("docs/results.schema.json: %v", err)
	}
	defs, _ := schema["$defs"].(map[string]any)
	compareSchema(t, "results", reflect.TypeFor[Results](), schema, defs)
}

var (
	timeType     = reflect.TypeFor[time.Time]()
	durationType = reflect.TypeFor[Duration]()
)

// compareSchema compares type typ with its schema node at path.
func compareSchema(t *testing.T, path string, typ reflect.Type, node, defs map[string]any) {
	t.Helper()
	if ref, ok := node["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/$defs/")
		def, ok := defs[name].(map[string]any)
		if !ok {
			t.Errorf("%s: $ref %s not in $defs", path, ref)
			return
		}
		node = def
	}
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch {
	case typ == timeType || typ == durationType:
		return
	case typ.Kind() == reflect.Slice:
		items, ok := node["items"].(map[string]any)
		if !ok {
			t.Errorf("%s: an array in Go, no items in the schema", path)
			return
		}
		compareSchema(t, path+"[]", typ.Elem(), items, defs)
	case typ.Kind() == reflect.Struct:
		props, ok := node["properties"].(map[string]any)
		if !ok {
			t.Errorf("%s: an object in Go, no properties in the schema", path)
			return
		}
		var fields []string
		for f := range typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			fields = append(fields, name)
			p, ok := props[name].(map[string]any)
			if !ok {
				t.Errorf("%s.%s: in Go, not in docs/results.schema.json", path, name)
				continue
			}
			compareSchema(t, path+"."+name, f.Type, p, defs)
		}
		for name := range props {
			if !slices.Contains(fields, name) {
				t.Errorf("%s.%s: in docs/results.schema.json, not in Go", path, name)
			}
		}
	}
}
