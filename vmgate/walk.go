package vmgate

import (
	"fmt"
	"hash/maphash"
	"maps"
	"path"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// walker reads one script in the order bash would run it.
type walker struct {
	g   *Gate
	src string // the text being walked, for the refused command's text

	depth        int // strings parsed again as code
	placeholders bool
	oline, ocol  int // position of the outermost command when depth > 0

	vars     map[string]value
	shared   bool // vars belongs to an enclosing scope too: copy before writing
	copies   int  // how many times vars was copied, to see whether a branch assigned
	ifs      bool
	exitTrap *deferred // the EXIT trap, walked after the body (commands.go)
	pos      []field   // positional parameters $1...
	posKnown bool

	// files the script itself wrote (echo ... > f, cat > f <<EOF), so
	// that running one (bash f, ./f, source f) is read too.
	files map[string]input
	// aliasOf: names and paths the script made stand for a program: hash
	// -p PATH NAME, ln -s PATH LINK, cp PATH COPY. Running one runs that
	// program (commands.go, renamed).
	aliasOf map[string]string

	// inherit is the environment the commands being read inherit from
	// the command that runs them: FOO=x f runs f's body, and FOO=x bash
	// -c '...' its code, with FOO set (envLookup).
	inherit []envVar

	funcs         map[string]*syntax.Stmt
	caller        string // the outermost function call being read, for messages
	calling       map[uint64]bool
	defCalled     map[uint64]bool // calls read where a function is defined
	callSeed      maphash.Seed
	aliases       map[string]value
	expandAliases bool
	gitKeys       bool // a GIT_CONFIG_KEY_<n> was set: envConfig looks for them
	probing       int  // > 0 while a word that may be git is tried as git

	// The budgets spent (budget.go), and the statement being read, for
	// the refusal when one runs out.
	work, mem, level int
	memLimit         int
	cur              syntax.Node

	defWalk int // > 0 while a function body is read where it is defined
	gitW    *finding
	pol     *finding
	undec   *finding
	done    bool

	// What a function body holds where it is defined: it counts even if
	// the function is never called, but after everything that runs,
	// since a call (read again with its arguments) runs it in order.
	defGit, defPol *finding
}

func newWalker(g *Gate, src string, nodes int) *walker {
	return &walker{g: g, src: src, memLimit: memLimit(nodes)}
}

// result is the first git write, else the first policy denial, else the
// first undecidable command: a certain write is named over a doubt.
func (w *walker) result() *finding {
	switch {
	case w.gitW != nil:
		return w.gitW
	case w.defGit != nil:
		return w.defGit
	case w.pol != nil:
		return w.pol
	case w.defPol != nil:
		return w.defPol
	}
	return w.undec
}

func (w *walker) record(f *finding) {
	if w.defWalk > 0 && !f.fatal {
		switch f.reason {
		case ReasonGitWrite:
			if w.defGit == nil {
				w.defGit = f
			}
			return
		case ReasonPolicy:
			if w.defPol == nil {
				w.defPol = f
			}
			return
		case ReasonUndecidable:
			// Where a function is defined its arguments are unknown: a
			// doubt about them is settled by each call, which is read
			// with the call's arguments (g() { git "$@"; }; g status).
			return
		}
		// A parse error is no doubt about arguments: it stands.
	}
	switch f.reason {
	case ReasonGitWrite:
		if w.gitW == nil {
			w.gitW = f
		}
		// Nothing after the first git write can change the verdict.
		w.done = true
	case ReasonPolicy:
		if w.pol == nil {
			w.pol = f
		}
	default:
		// Where a function is defined its arguments are unknown: a doubt
		// about them is settled by each call, which is read with the
		// call's arguments (g() { git "$@"; }; g status passes).
		if w.undec == nil {
			w.undec = f
		}
	}
}

// where locates a node: in a string parsed again as code, the outer
// command that runs the string, since inner positions mean nothing to the
// script's author.
func (w *walker) where(n syntax.Node) (int, int, string) {
	text := ""
	if n != nil {
		a, b := int(n.Pos().Offset()), int(n.End().Offset())
		if a >= 0 && b <= len(w.src) && a <= b {
			text = w.src[a:b]
		}
		if w.placeholders {
			text = strings.ReplaceAll(text, placeholder, "${...}")
		}
	}
	if w.depth > 0 || n == nil {
		return w.oline, w.ocol, text
	}
	return int(n.Pos().Line()), int(n.Pos().Col()), text
}

func (w *walker) find(c *callCtx, reason Reason, git, why string) {
	if reason == ReasonUndecidable && (w.undec != nil || w.defWalk > 0) {
		return // it would not be kept (record): its text is not made
	}
	line, col, text := w.where(c.node)
	if w.caller != "" {
		why += " (" + w.caller + ")"
	}
	w.record(&finding{reason: reason, git: git, line: line, col: col, text: text, why: why})
}

func (w *walker) undecidable(c *callCtx, why string) {
	w.find(c, ReasonUndecidable, "", why)
}

func (w *walker) stmts(list []*syntax.Stmt, capture *input) {
	for _, s := range list {
		if w.done {
			return
		}
		// Only a lone command's output is known: two would interleave.
		var cp *input
		if len(list) == 1 {
			cp = capture
		}
		w.stmt(s, nil, cp)
	}
}

// input is what a command reads on its standard input: static text (which
// may hold dynMark) when known, else data the gate cannot see.
type input struct {
	known bool
	text  string
	// unseen: the output of a command the gate cannot read (python3
	// gen.py, cat notes): a shell fed it runs code the gate cannot see.
	// A download (curl, wget) is not unseen: an installer piped to a
	// shell is deliberately allowed (docs/gate.md).
	unseen bool
}

// downloads reports whether what s prints is a download: its last command
// (the one whose output a pipe takes) is curl or wget, or passes on what
// one printed (tee, cat without a file). A pipe is followed down its
// chain in a loop.
func downloads(s *syntax.Stmt) bool {
	for s != nil {
		switch c := s.Cmd.(type) {
		case *syntax.BinaryCmd:
			if c.Op != syntax.Pipe && c.Op != syntax.PipeAll {
				return false
			}
			if downloads(c.Y) {
				return true // c.Y is one command: no recursion past it
			}
			if !passesOn(c.Y) {
				return false
			}
			s = c.X
		case *syntax.CallExpr:
			name := callName(c)
			return name == "curl" || name == "wget"
		default:
			return false
		}
	}
	return false
}

// passesOn reports whether s prints what it reads: tee, or cat of nothing.
func passesOn(s *syntax.Stmt) bool {
	c, ok := s.Cmd.(*syntax.CallExpr)
	if !ok {
		return false
	}
	switch callName(c) {
	case "tee":
		return true
	case "cat":
		return len(c.Args) == 1
	}
	return false
}

// procSubst returns the process substitution a word is, if it is one.
func procSubst(w *syntax.Word) (*syntax.ProcSubst, bool) {
	if w == nil || len(w.Parts) != 1 {
		return nil, false
	}
	ps, ok := w.Parts[0].(*syntax.ProcSubst)
	return ps, ok
}

func callName(c *syntax.CallExpr) string {
	if len(c.Args) == 0 {
		return ""
	}
	name := c.Args[0].Lit()
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	return name
}

func (w *walker) stmt(s *syntax.Stmt, stdin, capture *input) {
	if w.done || !w.tick(1) {
		return
	}
	if w.level >= maxLevel {
		w.exhausted(fmt.Sprintf("its statements and calls nest more than %d deep: the gate's depth budget ran out", maxLevel))
		return
	}
	w.level++
	w.cur = s
	defer func() { w.level-- }()
	if ce, ok := s.Cmd.(*syntax.CallExpr); ok {
		w.call(ce, s, stdin, capture)
		return
	}
	// A compound command's redirections are set up before its body runs.
	w.redirs(s.Redirs)
	switch c := s.Cmd.(type) {
	case *syntax.Block:
		w.stmts(c.Stmts, capture)
	case *syntax.Subshell:
		w.scoped(func() { w.stmts(c.Stmts, capture) })
	case *syntax.BinaryCmd:
		w.binary(c, stdin, capture)
	case *syntax.IfClause:
		w.ifClause(c)
	case *syntax.WhileClause:
		w.stmts(c.Cond, nil)
		w.branches(true, func() { w.stmts(c.Do, nil); w.stmts(c.Cond, nil) })
	case *syntax.ForClause:
		w.forClause(c)
	case *syntax.CaseClause:
		w.caseClause(c)
	case *syntax.FuncDecl:
		w.funcDecl(c)
	case *syntax.ArithmCmd:
		w.arith(c.X)
	case *syntax.TestClause:
		w.test(c.X)
	case *syntax.DeclClause:
		w.decl(c)
	case *syntax.LetClause:
		for _, x := range c.Exprs {
			w.arith(x)
		}
	case *syntax.TimeClause:
		if c.Stmt != nil {
			w.stmt(c.Stmt, stdin, capture)
		}
	case *syntax.CoprocClause:
		w.scoped(func() { w.stmt(c.Stmt, nil, nil) })
	case *syntax.TestDecl:
		w.scoped(func() { w.stmt(c.Body, nil, nil) })
	}
}

// chain returns the commands of a chain of one kind of operator, in the
// order they run: a && b || c is ((a && b) || c) to the parser, a | b | c
// is ((a | b) | c). A chain of any length is walked in a loop, never by
// recursion, so that it costs no stack (1 MiB of "a&&" is 350,000 links).
func chain(c *syntax.BinaryCmd) []*syntax.Stmt {
	pipe := c.Op == syntax.Pipe || c.Op == syntax.PipeAll
	var ys []*syntax.Stmt
	x := c
	for {
		ys = append(ys, x.Y)
		l, ok := x.X.Cmd.(*syntax.BinaryCmd)
		if !ok || (l.Op == syntax.Pipe || l.Op == syntax.PipeAll) != pipe ||
			len(x.X.Redirs) > 0 || x.X.Negated || x.X.Background || x.X.Coprocess || x.X.Disown {
			ys = append(ys, x.X)
			break
		}
		x = l
	}
	slices.Reverse(ys)
	return ys
}

// binary walks a && b, a || b and a pipe. Each side of a pipe runs in a
// subshell; the left side's output is the right side's input.
func (w *walker) binary(c *syntax.BinaryCmd, stdin, capture *input) {
	parts := chain(c)
	w.tick(len(parts) - 2) // the links of the chain past the first
	last := len(parts) - 1
	switch c.Op {
	case syntax.Pipe, syntax.PipeAll:
		in := stdin
		download := false // what the pipe so far prints is a download
		for i, p := range parts {
			if w.done {
				return
			}
			out := new(input)
			if i == last {
				out = capture
			}
			w.scoped(func() { w.stmt(p, in, out) })
			if i < last {
				download = downloads(p) || passesOn(p) && download
				if !out.known {
					out.unseen = !download
				}
				in = out
			}
		}
	default:
		w.stmt(parts[0], stdin, nil)
		for i, p := range parts[1:] {
			if w.done {
				return
			}
			out := capture
			if i+1 < last {
				out = nil
			}
			w.branches(true, func() { w.stmt(p, stdin, out) })
		}
	}
}

// ifClause walks the condition, then each branch as one that may run.
func (w *walker) ifClause(c *syntax.IfClause) {
	w.stmts(c.Cond, nil)
	fns := []func(){func() { w.stmts(c.Then, nil) }}
	mayNone := true
	for e := c.Else; e != nil; e = e.Else {
		if len(e.Cond) == 0 {
			mayNone = false
		}
		fns = append(fns, func() { w.stmts(e.Cond, nil); w.stmts(e.Then, nil) })
	}
	w.branches(mayNone, fns...)
}

// forClause walks a loop over words all known once for each, in order
// (the write it names is the one that runs first); any other loop's body
// as one that may run.
func (w *walker) forClause(c *syntax.ForClause) {
	name, items := w.loop(c.Loop)
	if items == nil {
		w.branches(true, func() { w.stmts(c.Do, nil) })
		return
	}
	for _, it := range items {
		w.setVar(name, value{s: it, known: true})
		w.stmts(c.Do, nil)
		if w.done {
			return
		}
	}
}

// caseClause walks each item as a branch that may run.
func (w *walker) caseClause(c *syntax.CaseClause) {
	w.str(c.Word)
	var fns []func()
	for _, it := range c.Items {
		fns = append(fns, func() {
			for _, p := range it.Patterns {
				w.str(p)
			}
			w.stmts(it.Stmts, nil)
		})
	}
	w.branches(true, fns...)
}

// funcDecl records a function for its calls. The body counts even if the
// function is never called; its arguments are unknown here.
func (w *walker) funcDecl(c *syntax.FuncDecl) {
	if w.funcs == nil {
		w.funcs = map[string]*syntax.Stmt{}
	}
	if c.Name != nil && c.Name.Value != "" && w.charge(fieldBytes) {
		w.funcs[c.Name.Value] = c.Body
	}
	w.scoped(func() {
		pos, known := w.pos, w.posKnown
		w.pos, w.posKnown = nil, false
		w.defWalk++
		w.stmt(c.Body, nil, nil)
		w.defWalk--
		w.pos, w.posKnown = pos, known
	})
}

// scoped runs fn in a subshell: its variables do not outlive it. The
// map is copied only if fn assigns (copy on write: most subshells and
// substitutions assign nothing, and copying each one costs more than the
// parse).
func (w *walker) scoped(fn func()) {
	saved, shared := w.vars, w.shared
	w.shared = true
	fn()
	w.vars, w.shared = saved, shared
}

// branches walks code of which any one part, or (mayNone) none, runs:
// the gate does not evaluate conditions, so every branch counts, and a
// variable is known afterwards only if every path leaves it the same.
func (w *walker) branches(mayNone bool, fns ...func()) {
	pre, shared := w.vars, w.shared
	copies := w.copies
	var states []map[string]value
	if mayNone {
		states = append(states, pre)
	}
	for _, fn := range fns {
		w.vars, w.shared = pre, true
		fn()
		states = append(states, w.vars)
	}
	if w.copies == copies {
		// No branch assigned anything: nothing to join.
		w.vars, w.shared = pre, shared
		return
	}
	w.vars, w.shared = w.join(states), false
}

func (w *walker) join(states []map[string]value) map[string]value {
	if len(states) == 1 {
		return states[0]
	}
	entries := 0
	for _, st := range states {
		entries += len(st)
	}
	if !w.charge(entries*fieldBytes) || !w.tick(entries) {
		return nil
	}
	var out map[string]value
	for _, st := range states {
		for k := range st {
			if _, done := out[k]; done {
				continue
			}
			if out == nil {
				out = map[string]value{}
			}
			out[k] = w.joinVar(k, states)
		}
	}
	return out
}

func (w *walker) joinVar(k string, states []map[string]value) value {
	first, ok := states[0][k]
	same := ok && first.known
	for _, st := range states[1:] {
		v, ok := st[k]
		if !ok || !v.known || v.arr != first.arr || v.s != first.s || !slicesEqual(v.list, first.list) {
			same = false
			break
		}
	}
	if same {
		return first
	}
	var hint strings.Builder
	for _, st := range states {
		v, ok := st[k]
		if !ok || !v.known {
			if ok && v.hint != "" && hint.Len() < 256 {
				hint.WriteString(" " + v.hint)
			}
			continue
		}
		if hint.Len() < 256 {
			hint.WriteString(" " + v.s + " " + strings.Join(v.list, " "))
		}
	}
	w.charge(2 * hint.Len())
	return value{hint: hint.String()}
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// maxValue and maxList bound what the gate keeps of a variable: a value
// that doubles at each line (a=$a$a) must not take the memory with it.
const (
	maxValue = 1 << 16
	maxList  = 1024
)

func (w *walker) setVar(name string, v value) {
	size := len(name) + len(v.s) + len(v.hint) + fieldBytes
	for _, e := range v.list {
		size += len(e) + 16
	}
	if len(v.s) > maxValue || len(v.list) > maxList || len(v.hint) > maxValue || size > 4*maxValue {
		v = value{}
		size = len(name) + fieldBytes
	}
	if w.vars == nil || w.shared {
		// Copied on write: paid for, entry by entry, since a script can
		// make a branch copy every variable it set.
		size += len(w.vars) * fieldBytes
		m := make(map[string]value, len(w.vars)+1)
		maps.Copy(m, w.vars)
		w.vars, w.shared = m, false
		w.copies++
	}
	if !w.charge(size) {
		return
	}
	switch {
	case name == "IFS":
		w.ifs = true
	case strings.HasPrefix(name, "GIT_CONFIG_KEY_"):
		w.gitKeys = true
	}
	w.vars[name] = v
}

// hintOf is what a value may hold, for the undecidable rule: its text,
// elements and hint, paid for.
func (w *walker) hintOf(v value) string {
	if v.arr {
		h := strings.Join(v.list, " ") + " " + v.hint
		w.charge(len(h))
		return h
	}
	w.charge(len(v.s) + len(v.hint))
	return v.s + " " + v.hint
}

// maxIter bounds the words of a loop whose body is walked once for each.
const maxIter = 32

// loop sets the loop's variable as its words allow; when every word is
// known (and there are at most maxIter), it returns them, for the body to
// be walked once for each.
func (w *walker) loop(l syntax.Loop) (string, []string) {
	switch l := l.(type) {
	case *syntax.WordIter:
		var items []field
		if !l.InPos.IsValid() && len(l.Items) == 0 {
			items = append(items, w.pos...)
			if !w.posKnown {
				items = append(items, field{s: string(dynMark), dyn: true})
			}
		}
		for _, it := range l.Items {
			items = w.fields(items, it)
		}
		if len(items) > 0 && len(items) <= maxIter && !slices.ContainsFunc(items, func(f field) bool { return f.dyn || f.glob }) {
			words := make([]string, len(items))
			for i, it := range items {
				words[i] = it.s
			}
			return l.Name.Value, words
		}
		v := value{}
		if len(items) == 1 && !items[0].dyn && !items[0].glob {
			v = value{s: items[0].s, known: true}
		} else {
			var b strings.Builder
			for _, it := range items {
				if b.Len() < 256 {
					b.WriteString(" " + it.s + it.hint)
				}
			}
			v.hint = b.String()
		}
		w.setVar(l.Name.Value, v)
	case *syntax.CStyleLoop:
		w.arith(l.Init)
		w.arith(l.Cond)
		w.arith(l.Post)
	}
	return "", nil
}

func (w *walker) arith(x syntax.ArithmExpr) {
	if x == nil || !w.tick(1) {
		return
	}
	switch x := x.(type) {
	case *syntax.BinaryArithm:
		w.arith(x.X)
		w.arith(x.Y)
	case *syntax.UnaryArithm:
		w.arith(x.X)
	case *syntax.ParenArithm:
		w.arith(x.X)
	case *syntax.FlagsArithm:
		w.arith(x.X)
	case *syntax.Word:
		w.str(x)
	}
}

func (w *walker) test(x syntax.TestExpr) {
	if x == nil || !w.tick(1) {
		return
	}
	switch x := x.(type) {
	case *syntax.BinaryTest:
		w.test(x.X)
		w.test(x.Y)
	case *syntax.UnaryTest:
		w.test(x.X)
	case *syntax.ParenTest:
		w.test(x.X)
	case *syntax.Word:
		w.str(x)
	}
}

func (w *walker) decl(d *syntax.DeclClause) {
	for _, a := range d.Args {
		if a.Name == nil {
			if a.Value != nil {
				w.str(a.Value)
			}
			continue
		}
		if a.Naked {
			continue
		}
		w.setVar(a.Name.Value, w.assignValue(a))
	}
}

// assignValue expands an assignment's value (running its substitutions).
func (w *walker) assignValue(a *syntax.Assign) value {
	w.tick(1)
	if a.Index != nil {
		w.arith(a.Index)
	}
	var v value
	switch {
	case a.Array != nil:
		v = value{arr: true, known: true}
		var fs []field
		for _, el := range a.Array.Elems {
			if el.Index != nil {
				w.arith(el.Index)
				v.known = false
			}
			if el.Value != nil {
				fs = w.fields(fs, el.Value)
			}
		}
		for _, f := range fs {
			if f.dyn || f.glob {
				v.known = false
			}
			v.list = append(v.list, f.s)
		}
		if !v.known {
			v = value{hint: strings.Join(v.list, " ")}
		}
	case a.Value != nil:
		f := w.str(a.Value)
		v = value{s: f.s, known: !f.dyn, hint: f.hint}
		if f.dyn {
			v.hint += " " + strings.ReplaceAll(f.s, string(dynMark), " ")
		}
	default:
		v = value{known: true}
	}
	if a.Index != nil {
		// arr[i]=x: the gate does not follow single elements.
		return value{hint: v.s}
	}
	if a.Append {
		old, ok := w.vars[a.Name.Value]
		if !ok || !old.known || !v.known || old.arr != v.arr {
			return value{hint: old.s + " " + v.s + " " + v.hint}
		}
		if v.arr {
			return value{arr: true, known: true, list: append(append([]string(nil), old.list...), v.list...)}
		}
		return value{s: old.s + v.s, known: true}
	}
	return v
}

// outFile is where a command's standard output goes when a redirection
// names a static file.
type outFile struct {
	path   string
	append bool
}

// redirs expands redirection words (running their substitutions) and
// returns what the command reads on standard input, if a redirection sets it.
func (w *walker) redirs(rs []*syntax.Redirect) *input {
	in, _ := w.redirsOut(rs)
	return in
}

func (w *walker) redirsOut(rs []*syntax.Redirect) (*input, *outFile) {
	var in *input
	var out *outFile
	for _, r := range rs {
		if w.done || !w.tick(1) {
			return in, out
		}
		fd0 := r.N == nil || r.N.Value == "0"
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			quoted := false
			for _, p := range r.Word.Parts {
				if _, ok := p.(*syntax.Lit); !ok {
					quoted = true
				}
			}
			if r.Word.Lit() != "" && strings.ContainsAny(r.Word.Lit(), `\`) {
				quoted = true
			}
			var f field
			if r.Hdoc != nil {
				f = w.heredoc(r.Hdoc, quoted)
			}
			if fd0 {
				in = &input{known: true, text: f.s}
			}
		case syntax.WordHdoc:
			f := w.str(r.Word)
			if fd0 && w.charge(len(f.s)+1) {
				in = &input{known: true, text: f.s + "\n"}
			}
		default:
			fs := w.fields(nil, r.Word)
			if fd0 && (r.Op == syntax.RdrIn || r.Op == syntax.RdrInOut || r.Op == syntax.DplIn) {
				in = &input{}
				if len(fs) == 1 && fs[0].proc != nil {
					in = &input{known: true, text: *fs[0].proc}
				} else if ps, ok := procSubst(r.Word); ok {
					// < <(cmd) is cmd | ...: unseen unless a download.
					in = &input{unseen: !(len(ps.Stmts) == 1 && downloads(ps.Stmts[0]))}
				} else if len(fs) == 1 && !fs[0].dyn && r.Op == syntax.RdrIn {
					if f, ok := w.files[cleanPath(fs[0].s)]; ok {
						in = &f // bash < run.sh, written above
					}
				}
			}
			switch r.Op {
			case syntax.RdrOut, syntax.AppOut, syntax.ClbOut, syntax.RdrAll, syntax.AppAll, syntax.RdrInOut:
				// The statement is quoted, not the redirection alone, when
				// it is the one being read.
				var at syntax.Node = r
				if cur := w.cur; cur != nil && cur.Pos().Offset() <= r.Pos().Offset() && r.End().Offset() <= cur.End().Offset() {
					at = cur
				}
				for _, f := range fs {
					w.writesGitFile(f, false, at)
				}
			}
			fd1 := r.N == nil || r.N.Value == "1"
			switch r.Op {
			case syntax.RdrOut, syntax.AppOut, syntax.ClbOut, syntax.RdrAll, syntax.AppAll:
				if fd1 && len(fs) == 1 && !fs[0].dyn && !fs[0].glob {
					out = &outFile{path: fs[0].s, append: r.Op == syntax.AppOut || r.Op == syntax.AppAll}
				}
			}
		}
	}
	return in, out
}

// wrote records what a command wrote to a file the script may run later.
func (w *walker) wrote(path string, content input, appendTo bool) {
	if strings.HasPrefix(path, "/dev/") || strings.HasPrefix(path, "/proc/") {
		return
	}
	if w.files == nil {
		w.files = map[string]input{}
	}
	key := cleanPath(path)
	if old, ok := w.files[key]; ok && appendTo {
		content = input{known: old.known && content.known, text: old.text + content.text}
	}
	if len(content.text) > 4*maxValue {
		content = input{}
	}
	if !w.charge(len(key) + len(content.text) + fieldBytes) {
		return
	}
	if !content.known {
		// Written by a command whose output is not known (curl -o, a
		// generator): like any file the gate did not see written, it is
		// not read, as `curl ... | bash` is not.
		delete(w.files, key)
		return
	}
	w.files[key] = content
}

func cleanPath(p string) string {
	return strings.TrimPrefix(path.Clean(p), "./")
}

// cmdSubst walks a command substitution, which runs in a subshell before
// the command whose word holds it, and returns its output when static.
func (w *walker) cmdSubst(list []*syntax.Stmt) input {
	var out input
	w.scoped(func() { w.stmts(list, &out) })
	return out
}

func (w *walker) procSubst(p *syntax.ProcSubst) input {
	var out input
	w.scoped(func() { w.stmts(p.Stmts, &out) })
	return out
}

// callCtx is what a simple command carries while the gate unwraps it.
type callCtx struct {
	node     syntax.Node // the simple command, for position and text
	env      []envVar    // assignments for the command's environment
	stdin    *input
	capture  *input // where a producer's static output goes (pipes, $(...))
	noFunc   bool   // command, builtin, exec and wrappers bypass functions
	moreArgs bool   // xargs: more arguments come from its input
	callWord *syntax.Word
	call     *syntax.CallExpr
	argv0    *field // exec -a NAME: what the next program is called
}

type envVar struct {
	name string
	v    field
	// raw is the value's text with only its unknown parts marked
	// (PATH=/tmp/b:$PATH is "/tmp/b:" and a mark), where v holds a mark
	// alone: where a search of PATH starts is known.
	raw string
}

func (w *walker) call(ce *syntax.CallExpr, s *syntax.Stmt, stdin, capture *input) {
	// bash expands the words first, then sets up redirections, then
	// expands the assignments' values, and only then runs the command.
	argv := make([]field, 0, len(ce.Args))
	for _, a := range ce.Args {
		argv = w.fields(argv, a)
		if w.done {
			return
		}
	}
	w.cur = s // the words' substitutions read statements of their own
	in, out := w.redirsOut(s.Redirs)
	if in != nil {
		stdin = in
	}
	if len(ce.Args) == 0 {
		for _, a := range ce.Assigns {
			if a.Name != nil {
				w.setVar(a.Name.Value, w.assignValue(a))
			}
		}
		return
	}
	var env []envVar
	for _, a := range ce.Assigns {
		v := w.assignValue(a)
		if a.Name != nil {
			f := field{s: v.s, dyn: !v.known, hint: v.hint}
			if f.dyn {
				f.s = string(dynMark)
			}
			env = append(env, envVar{name: a.Name.Value, v: f, raw: v.s})
		}
	}
	if w.done || len(argv) == 0 {
		return
	}
	c := &callCtx{node: ce, env: env, stdin: stdin, capture: capture, call: ce, callWord: ce.Args[0]}
	if out == nil {
		w.exec(argv, c)
		return
	}
	// Output to a file: what a producer writes there is remembered.
	var written input
	c.capture = &written
	w.exec(argv, c)
	w.wrote(out.path, written, out.append)
}
