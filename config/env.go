package config

import (
	"reflect"
	"strings"

	"github.com/kelseyhightower/envconfig"
)

// Prefix of every variable.
const Prefix = "CODERUN"

// readEnv returns the text of every table variable that is set, by name, as
// envconfig reads it; rules and defaults are the table's, applied by Load.
func readEnv() (map[string]string, error) {
	spec := envSpec()
	if err := envconfig.Process(Prefix, spec.Interface()); err != nil {
		return nil, err
	}
	set := map[string]string{}
	for i, v := range table {
		if f := spec.Elem().Field(i).Interface().(envText); f.set {
			set[v.name] = f.text
		}
	}
	return set, nil
}

// envSpec is a pointer to a new envconfig spec built from the table: one
// field per variable, named so that split_words spells the variable's name
// after Prefix (TestEnvconfigNames). No field has an envconfig name tag:
// with one, envconfig v1.4.0 falls back to the unprefixed name, and
// CPU_SECONDS must never be read.
func envSpec() reflect.Value {
	fields := make([]reflect.StructField, len(table))
	for i, v := range table {
		fields[i] = reflect.StructField{Name: fieldName(v.name), Type: reflect.TypeFor[envText](),
			Tag: `split_words:"true"`}
	}
	return reflect.New(reflect.StructOf(fields))
}

// fieldName is the Go field name whose split_words spelling is name without
// Prefix: CODERUN_ADDRESS_SPACE_MB → AddressSpaceMb.
func fieldName(name string) string {
	var b strings.Builder
	for _, w := range strings.Split(strings.TrimPrefix(name, Prefix+"_"), "_") {
		b.WriteString(w[:1] + strings.ToLower(w[1:]))
	}
	return b.String()
}

// envText is a variable's text as set (told apart from unset, so the empty
// string is a value). It implements envconfig.Decoder and never fails: the
// table's rules judge the text, in table order, in Load.
type envText struct {
	text string
	set  bool
}

// Decode implements envconfig.Decoder.
func (x *envText) Decode(s string) error {
	x.text, x.set = s, true
	return nil
}
