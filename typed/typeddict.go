package typed

import "strings"

// typedDict names an object schema with properties (its title, else the
// scope's name) and defines it as a TypedDict, once per node. Required keys
// and optional keys are declared in two classes (a base and a total=False
// subclass) so the stub needs nothing beyond Python 3.10's typing; keys that
// are not identifiers force the functional TypedDict("…", {…}) form.
func (t *typer) typedDict(o, props *object, sc scope) string {
	if name, ok := t.named[o]; ok {
		return name
	}
	base := sc.name
	if title, ok := o.vals["title"].(string); ok && camel(title) != "T" {
		base = camel(title)
	}
	name := t.names.unique(base)
	t.named[o] = name
	t.uses["TypedDict"] = true
	required := requiredSet(o)
	var req, opt []field
	for _, k := range props.keys {
		f := field{key: k, typ: t.pyType(props.vals[k], sc.at(k))}
		if required[k] {
			req = append(req, f)
		} else {
			opt = append(opt, f)
		}
	}
	t.classes = append(t.classes, t.defineDict(name, req, opt))
	return name
}

type field struct{ key, typ string }

func (t *typer) defineDict(name string, req, opt []field) string {
	for _, f := range append(req, opt...) {
		if !isIdentifier(f.key) {
			return t.functionalDict(name, req, opt)
		}
	}
	switch {
	case len(opt) == 0:
		return classDict(name, "TypedDict", req)
	case len(req) == 0:
		return classDict(name, "TypedDict, total=False", opt)
	}
	baseName := t.names.unique("_" + name + "Required")
	return classDict(baseName, "TypedDict", req) + classDict(name, baseName+", total=False", opt)
}

func classDict(name, bases string, fields []field) string {
	var sb strings.Builder
	sb.WriteString("class " + name + "(" + bases + "):\n")
	for _, f := range fields {
		sb.WriteString("    " + f.key + ": " + f.typ + "\n")
	}
	if len(fields) == 0 {
		sb.WriteString("    pass\n")
	}
	return sb.String() + "\n"
}

func (t *typer) functionalDict(name string, req, opt []field) string {
	reqName := t.names.unique("_" + name + "Required")
	optName := t.names.unique("_" + name + "Optional")
	return dictCall(reqName, req, "") + dictCall(optName, opt, ", total=False") +
		"class " + name + "(" + reqName + ", " + optName + "):\n    pass\n\n"
}

func dictCall(name string, fields []field, total string) string {
	var sb strings.Builder
	sb.WriteString(name + " = TypedDict(" + pyString(name) + ", {")
	for i, f := range fields {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(pyString(f.key) + ": " + f.typ)
	}
	return sb.String() + "}" + total + ")\n"
}
