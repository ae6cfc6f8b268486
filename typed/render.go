package typed

import (
	"strconv"
	"strings"

	"github.com/coderun-rpc/coderun-rpc/protocol"
)

// Namespace is one binding as the stubs show it: its global and its
// functions in declaration order.
type Namespace struct {
	Global    string
	Functions []*Function
}

// Stubs is the rendered module and, per function, what the child needs for
// help(), __doc__ and dir().
type Stubs struct {
	Text    string   // the whole .pyi module (docs/protocol-typed.md §10.4)
	Methods []Method // one per function, namespaces in order, functions in order
}

// Method is one function's part of the stubs.
type Method struct {
	Global, Name string
	// Stub is the function's text as it appears in its class, unindented:
	// "async def name(self, …) -> R:" and its docstring, or for a name that is
	// not an identifier, the comment showing its call form.
	Stub string
	// Doc is the docstring (Function.Doc), unescaped.
	Doc string
	// Signature is what the child binds a call's arguments to and shows for
	// introspection (docs/child-protocol-wire.md §2.2); nil when the function
	// declares no parameters (the untyped calling rules apply).
	Signature *protocol.Signature
}

// Render renders the stubs of a run: a header with the effective budgets
// and the Python version, the TypedDicts the schemas need, one class per
// namespace, then one module-level declaration per namespace. The text
// always parses; mypy --strict accepts it as a .pyi.
func Render(limits protocol.Limits, python string, namespaces []Namespace) *Stubs {
	globals := make([]string, len(namespaces))
	for i, ns := range namespaces {
		globals[i] = ns.Global
	}
	t := newTyper(newNamer(globals...))
	classNames := make([]string, len(namespaces)) // before any TypedDict can take one
	for i, g := range globals {
		classNames[i] = t.names.unique(camel(g))
	}
	var out Stubs
	var classes, decls strings.Builder
	for i, ns := range namespaces {
		body, methods := t.classBody(ns)
		out.Methods = append(out.Methods, methods...)
		classes.WriteString("class " + classNames[i] + ":\n" + body)
		decls.WriteString(ns.Global + ": " + classNames[i] + "\n")
	}
	out.Text = header(limits, python) + t.imports() + strings.Join(t.classes, "") + classes.String() + decls.String()
	return &out
}

// classBody is the indented body of a namespace's class; "pass" when no
// function is a method (none, or only comments for non-identifier names).
func (t *typer) classBody(ns Namespace) (string, []Method) {
	var body strings.Builder
	methods := make([]Method, len(ns.Functions))
	hasMethod := false
	for i, f := range ns.Functions {
		methods[i] = t.method(ns.Global, f)
		hasMethod = hasMethod || isIdentifier(f.Name)
		body.WriteString(indent(methods[i].Stub, "    ") + "\n")
	}
	if !hasMethod {
		body.WriteString("    pass\n\n")
	}
	return body.String(), methods
}

func header(l protocol.Limits, python string) string {
	return "# coderun-rpc: the functions this program can call, as a Python stub.\n" +
		"# " + Budgets(l) + "\n" +
		"# Python " + commentText(python) + ". Every function is async: await it.\n\n"
}

// Budgets is the stubs' line of a run's budgets, without its comment mark:
// "Budgets: CPU 60 s, wall 60000 ms, log 65536 bytes, value 32768 bytes.".
func Budgets(l protocol.Limits) string {
	return "Budgets: CPU " + strconv.FormatInt(l.CPUSeconds, 10) + " s, wall " +
		strconv.FormatInt(l.MaxWallMs, 10) + " ms, log " + strconv.FormatInt(l.MaxLogBytes, 10) +
		" bytes, value " + strconv.FormatInt(l.MaxValueBytes, 10) + " bytes."
}

func (t *typer) imports() string {
	var names []string
	for _, n := range []string{"Any", "Literal", "TypedDict"} {
		if t.uses[n] {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return "from typing import " + strings.Join(names, ", ") + "\n\n"
}

// method renders one function: a method when its name is an identifier,
// else a comment with its call form.
func (t *typer) method(global string, f *Function) Method {
	m := Method{Global: global, Name: f.Name, Doc: f.Doc}
	params, byKeyword, ret, defaults := t.signature(f)
	if len(byKeyword) > 0 {
		m.Stub = "# keyword arguments, passed as **{...}: " + strings.Join(byKeyword, ", ") + "\n"
	}
	if !isIdentifier(f.Name) {
		m.Stub += "# " + global + "[" + pyString(f.Name) + "](" + params + ") -> " + ret + "\n" +
			commentBlock(f.Doc)
		m.Signature = childSignature(f, defaults, m.Stub)
		return m
	}
	m.Stub += "async def " + f.Name + "(self" + prefixComma(params) + ") -> " + ret + ":\n"
	if f.Doc == "" {
		m.Stub += "    ...\n"
	} else {
		m.Stub += docstring(docBody(f.Doc))
	}
	m.Signature = childSignature(f, defaults, m.Stub)
	return m
}

// childSignature is the boot frame's Signature of f: its params with the
// default each shows in the stub (left out when the stub shows "..."); nil
// when f declares no parameters. defaults is aligned with f.Params.
func childSignature(f *Function, defaults []string, stub string) *protocol.Signature {
	if f.params == nil {
		return nil
	}
	_, kwargs := f.extraKeywords()
	sig := &protocol.Signature{Params: make([]protocol.Param, len(f.Params)), Doc: f.Doc, Stub: stub, Kwargs: kwargs}
	for i, p := range f.Params {
		sig.Params[i] = protocol.Param{Name: p.Name, Required: p.Required}
		if d := defaults[i]; d != "" && d != "..." {
			sig.Params[i].Default = &d
		}
	}
	return sig
}

// signature is the parameter list (without self), the return type and the
// default literal of each parameter (aligned with f.Params).
func (t *typer) signature(f *Function) (params string, byKeyword []string, ret string, defaults []string) {
	name := camel(f.Name)
	if f.params == nil { // the untyped calling rules: one JSON argument, or keywords
		params = "args: " + t.any() + " = None"
	} else {
		params, byKeyword, defaults = t.paramList(f, newScope(f.params.tree, name+"Args"))
	}
	ret = t.any()
	if f.returns != nil {
		ret = t.pyType(f.returns.tree, newScope(f.returns.tree, name+"Result"))
	}
	return params, byKeyword, ret, defaults
}

// paramList is the Python parameters and, apart, the parameters whose names
// are not identifiers (passed as **{"name": value}; the stub shows **kwargs).
func (t *typer) paramList(f *Function, sc scope) (params string, byKeyword, defaults []string) {
	props := objectMember(f.params.tree.(*object), "properties")
	var parts []string
	defaults = make([]string, len(f.Params))
	for i, p := range f.Params {
		prop, _ := props.get(p.Name)
		typ := t.pyType(prop, sc.at(p.Name))
		defaults[i] = t.defaultText(p, props, typ)
		text := ": " + typ
		if defaults[i] != "" {
			text += " = " + defaults[i]
		}
		if p.KeywordOnly {
			byKeyword = append(byKeyword, pyString(p.Name)+text)
			continue
		}
		parts = append(parts, p.Name+text)
	}
	extra, open := f.extraKeywords()
	switch {
	case open && len(byKeyword) == 0:
		parts = append(parts, "**"+kwargsName(f.Params)+": "+t.extraType(extra, sc))
	case open || len(byKeyword) > 0:
		parts = append(parts, "**"+kwargsName(f.Params)+": "+t.any())
	}
	return strings.Join(parts, ", "), byKeyword, defaults
}

// extraType is the Python type of the keywords additionalProperties lets
// through: its schema's, or Any for true.
func (t *typer) extraType(extra any, sc scope) string {
	if o, ok := extra.(*object); ok {
		return t.pyType(o, sc.at("Extra"))
	}
	return t.any()
}

// defaultText is the default a parameter shows in the stub: "" when it is
// required, "..." when the schema gives none that fits its type.
func (t *typer) defaultText(p Param, props *object, typ string) string {
	if p.Required {
		return ""
	}
	if sub, ok := props.vals[p.Name].(*object); ok {
		if d, ok := sub.get("default"); ok && fits(d, typ) {
			return pyLiteral(d)
		}
	}
	return "..."
}

func prefixComma(s string) string {
	if s == "" {
		return ""
	}
	return ", " + s
}

// indent prefixes every non-empty line of text.
func indent(text, prefix string) string {
	lines := strings.SplitAfter(text, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "")
}

func commentBlock(doc string) string {
	var sb strings.Builder
	for _, line := range strings.Split(doc, "\n") {
		if doc != "" {
			sb.WriteString("#     " + commentText(line) + "\n")
		}
	}
	return sb.String()
}

// docstring is the method body: the escaped doc in triple quotes, indented
// as a method body, the closing quotes on their own line when it spans lines.
func docstring(body string) string {
	first, rest, multi := strings.Cut(body, "\n")
	if !multi {
		return "    \"\"\"" + first + "\"\"\"\n"
	}
	return "    \"\"\"" + first + "\n" + indent(rest, "    ") + "\n    \"\"\"\n"
}

// kwargsName is "kwargs", or with underscores appended when a parameter
// already has that name.
func kwargsName(params []Param) string {
	name := "kwargs"
	for taken := true; taken; {
		taken = false
		for _, p := range params {
			if p.Name == name {
				name, taken = name+"_", true
			}
		}
	}
	return name
}
