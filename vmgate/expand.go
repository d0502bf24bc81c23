package vmgate

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"
)

// dynMark stands, inside a field's text, for a part whose value is only
// known at run time. A NUL can never come from the script itself.
const dynMark = '\x00'

// placeholder replaces dynMark when a string is parsed again as code: it
// is a plain word, so it cannot break the quoting of the code around it.
const placeholder = "__vmgate_dynamic__"

// field is one word after expansion, as bash would pass it to a command.
type field struct {
	s      string  // the text; dynMark where a value is unknown
	dyn    bool    // some part's value is only known at run time
	glob   bool    // unquoted glob or brace characters: the word may become other words
	quoted bool    // some part was quoted (aliases are not expanded then)
	hint   string  // values an unknown part may take (branches, for loops), for the undecidable rule
	param  string  // the variable's name when the whole word is one expansion ("$SHELL")
	proc   *string // the static output of a lone process substitution <(...)
	brace  bool    // unquoted {a,b}: bash makes several words of it
}

// value is what the gate knows about a shell variable.
type value struct {
	s     string
	list  []string // array elements, when arr
	arr   bool
	known bool
	hint  string
}

type expander struct {
	w       *walker
	out     []field
	cur     []byte
	split   bool // field splitting and globbing apply (command words, not assignments)
	heredoc bool
	f       field
	started bool
}

func (e *expander) flush() {
	if !e.started {
		return
	}
	e.f.s = string(e.cur)
	e.w.charge(3*len(e.cur) + len(e.f.hint) + fieldBytes)
	if e.f.brace {
		n := len(e.out)
		e.out = braces(e.out, e.f, 0)
		size := 0
		for _, f := range e.out[n:] {
			size += len(f.s) + fieldBytes
		}
		e.w.charge(size)
		e.cur = e.cur[:0]
		e.f = field{}
		e.started = false
		return
	}
	e.out = append(e.out, e.f)
	e.cur = e.cur[:0]
	e.f = field{}
	e.started = false
}

// room makes room for n more bytes in the word being built, doubling:
// append's own growth, a quarter at a time past 256 bytes, allocates five
// times a long word's size when it is built a byte at a time; doubling
// allocates at most twice, which the charge at flush covers.
func (e *expander) room(n int) {
	if cap(e.cur)-len(e.cur) >= n {
		return
	}
	b := make([]byte, len(e.cur), 2*(len(e.cur)+n))
	copy(b, e.cur)
	e.cur = b
}

func (e *expander) mark(hint string) {
	e.cur = append(e.cur, dynMark)
	e.f.dyn = true
	e.started = true
	if hint != "" {
		e.addHint(hint)
	}
}

func (e *expander) addHint(h string) {
	if len(e.f.hint) < 256 {
		e.f.hint += " " + h
	}
}

// fields expands a command's word into the fields bash would pass.
func (w *walker) fields(dst []field, word *syntax.Word) []field {
	w.tick(1)
	e := expander{w: w, out: dst, split: true}
	if len(word.Parts) == 1 {
		if pe, ok := word.Parts[0].(*syntax.ParamExp); ok && pe.Param != nil {
			e.f.param = pe.Param.Value
		}
		if ps, ok := word.Parts[0].(*syntax.ProcSubst); ok {
			out := w.procSubst(ps)
			f := field{s: "/dev/fd/63", dyn: true}
			if out.known {
				f.proc = &out.text
			}
			return append(dst, f)
		}
	}
	for i, p := range word.Parts {
		e.part(p, false, i == 0)
	}
	e.flush()
	return e.out
}

// str expands a word as one string, the way bash expands an assignment's
// value or a here-string: no field splitting, no globbing.
func (w *walker) str(word *syntax.Word) field {
	w.tick(1)
	e := expander{w: w}
	for i, p := range word.Parts {
		e.part(p, false, i == 0)
	}
	e.f.s = string(e.cur)
	w.charge(3*len(e.cur) + len(e.f.hint) + fieldBytes)
	return e.f
}

// heredoc expands a here-document's body: parameters and substitutions,
// but no quote removal; a quoted delimiter leaves the body as it is.
func (w *walker) heredoc(word *syntax.Word, quotedDelim bool) field {
	w.tick(1)
	if quotedDelim {
		var b strings.Builder
		for _, p := range word.Parts {
			if l, ok := p.(*syntax.Lit); ok {
				b.WriteString(l.Value)
			}
		}
		w.charge(2*b.Len() + fieldBytes)
		return field{s: b.String()}
	}
	e := expander{w: w, heredoc: true}
	for _, p := range word.Parts {
		e.part(p, true, false)
	}
	e.f.s = string(e.cur)
	w.charge(3*len(e.cur) + len(e.f.hint) + fieldBytes)
	return e.f
}

func (e *expander) part(p syntax.WordPart, quoted, first bool) {
	w := e.w
	if !w.tick(1) {
		return
	}
	switch p := p.(type) {
	case *syntax.Lit:
		e.lit(p.Value, quoted, first)
	case *syntax.SglQuoted:
		e.f.quoted = true
		e.started = true
		e.room(len(p.Value))
		if p.Dollar {
			e.cur = append(e.cur, ansiC(p.Value)...)
		} else {
			e.cur = append(e.cur, p.Value...)
		}
	case *syntax.DblQuoted:
		e.f.quoted = true
		// "$@" with no positional parameters is no field at all.
		if len(p.Parts) == 1 {
			if pe, ok := p.Parts[0].(*syntax.ParamExp); ok && pe.Param != nil && pe.Param.Value == "@" && pe.Index == nil && pe.Exp == nil && !pe.Length && !pe.Excl {
				e.param(pe, true)
				return
			}
		}
		e.started = true
		for _, q := range p.Parts {
			e.part(q, true, false)
		}
	case *syntax.ParamExp:
		e.param(p, quoted)
	case *syntax.CmdSubst:
		out := w.cmdSubst(p.Stmts)
		if out.known {
			e.addValue(strings.TrimRight(out.text, "\n"), quoted)
		} else {
			e.mark("")
		}
	case *syntax.ArithmExp:
		w.arith(p.X)
		e.mark("")
	case *syntax.ProcSubst:
		w.procSubst(p)
		e.mark("")
	case *syntax.ExtGlob:
		e.cur = append(e.cur, '*')
		e.f.glob = true
		e.started = true
	case *syntax.BraceExp:
		e.f.glob = true
		e.mark("")
	}
}

func (e *expander) lit(s string, quoted, first bool) {
	e.started = true
	e.room(len(s))
	if e.w.placeholders && strings.Contains(s, placeholder) {
		parts := strings.Split(s, placeholder)
		for i, p := range parts {
			if i > 0 {
				e.mark("")
			}
			e.lit(p, quoted, first && i == 0)
		}
		return
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch == '\\' && i+1 < len(s) {
			next := s[i+1]
			switch {
			case next == '\n':
				i++
				continue
			case !quoted, next == '$', next == '`', next == '\\', next == '"' && !e.heredoc:
				e.cur = append(e.cur, next)
				i++
				continue
			}
		}
		if !quoted {
			switch ch {
			case '*', '?', '[':
				if e.split {
					e.f.glob = true
				}
			case '{':
				rest := s[i:]
				if e.split && strings.IndexByte(rest, '}') > 0 && (strings.IndexByte(rest, ',') > 0 || strings.Contains(rest, "..")) {
					e.f.brace = true
				}
			case '~':
				if i == 0 && first {
					// ~ is $HOME, ~user a user look-up: neither is known here.
					e.mark("")
					for i+1 < len(s) && s[i+1] != '/' {
						i++
					}
					continue
				}
			}
		}
		e.cur = append(e.cur, ch)
	}
}

// addValue adds a known value: split into fields when unquoted.
func (e *expander) addValue(v string, quoted bool) {
	e.started = true
	if len(e.cur)+len(v) > 4*maxValue || len(e.out) > maxList {
		e.mark("") // too big to follow: unknown
		return
	}
	e.room(len(v))
	if quoted || !e.split {
		e.cur = append(e.cur, v...)
		return
	}
	ifs, known := e.w.splitIFS()
	if !known {
		// IFS holds what only the run knows: how the value splits is not
		// known either.
		e.mark(v)
		return
	}
	for i := 0; i < len(v); i++ {
		ch := v[i]
		if strings.IndexByte(ifs, ch) >= 0 {
			// IFS whitespace separates (runs of it count once); any other
			// IFS character ends a field of its own, empty or not.
			if ch == ' ' || ch == '\t' || ch == '\n' {
				e.flush()
			} else {
				e.started = true
				e.flush()
			}
			continue
		}
		switch ch {
		case '*', '?', '[':
			e.f.glob = true
		}
		e.cur = append(e.cur, ch)
		e.started = true
	}
}

// defaultIFS is IFS unset (bash sets it so at start, whatever the
// environment says).
const defaultIFS = " \t\n"

// splitIFS returns the characters unquoted expansions split on, and
// whether they are known: IFS as the script last set it (followed like
// any variable), or the default.
func (w *walker) splitIFS() (string, bool) {
	if !w.ifs {
		return defaultIFS, true
	}
	v, ok := w.vars["IFS"]
	if !ok {
		return defaultIFS, true // unset IFS splits as the default
	}
	return v.s, v.known && !v.arr
}

// addList adds an array or "$@": each element its own field when quoted.
func (e *expander) addList(list []string, quoted bool) {
	for i, v := range list {
		if i > 0 {
			if quoted {
				e.flush()
				e.started = true
			} else {
				e.addValue(" ", false)
			}
		}
		e.addValue(v, quoted)
	}
}

func (e *expander) param(p *syntax.ParamExp, quoted bool) {
	w := e.w
	pa := e.paramWords(p)
	if p.Param == nil || p.Excl || p.Width || p.IsSet || p.Names != 0 || p.NestedParam != nil {
		e.markParam(p, pa.hint)
		return
	}
	if p.Length || p.Slice != nil || p.Repl != nil || p.Exp != nil {
		// ${X:1}, ${Y/q/i}, ${X,,}, ${#X}, ${X:-w}: evaluated as bash does
		// when its operands are known (params.go).
		if s, ok := w.operate(p, pa); ok {
			e.addValue(s, quoted)
			return
		}
		e.markParam(p, pa.hint)
		return
	}
	name := p.Param.Value
	if name == "@" || name == "*" {
		e.positionals(name == "*", quoted)
		return
	}
	if n, err := strconv.Atoi(name); err == nil {
		e.positional(n, quoted)
		return
	}
	v, ok := w.vars[name]
	if !ok && name == "IFS" {
		// bash never takes IFS from the environment: unset, it is this.
		v, ok = value{s: defaultIFS, known: true}, true
	}
	switch {
	case !ok || !v.known:
		e.mark(v.hint)
	case p.Index != nil:
		e.indexed(v, p.Index, quoted)
	case v.arr && len(v.list) > 0:
		e.addValue(v.list[0], quoted)
	case v.arr:
		e.addValue("", quoted)
	default:
		e.addValue(v.s, quoted)
	}
}

// markParam marks an expansion the gate cannot evaluate: what its
// variable holds is a hint of what the word may be.
func (e *expander) markParam(p *syntax.ParamExp, hint string) {
	if p.Param != nil {
		if v, ok := e.w.vars[p.Param.Value]; ok {
			hint += " " + e.w.hintOf(v)
		}
	}
	e.mark(hint)
}

// paramArgs are the words nested in an expansion, expanded.
type paramArgs struct {
	orig, with, word field
	hint             string // the replacement or default word: what the expansion may give
}

// paramWords walks the words nested in an expansion (whatever it is, they
// run their substitutions) and returns them.
func (e *expander) paramWords(p *syntax.ParamExp) paramArgs {
	w := e.w
	var pa paramArgs
	if p.Index != nil {
		w.arith(p.Index)
	}
	if p.Slice != nil {
		w.arith(p.Slice.Offset)
		w.arith(p.Slice.Length)
	}
	if p.Repl != nil {
		if p.Repl.Orig != nil {
			pa.orig = w.str(p.Repl.Orig)
		}
		if p.Repl.With != nil {
			pa.with = w.str(p.Repl.With)
			pa.hint = pa.with.s
		}
	}
	if p.Exp != nil && p.Exp.Word != nil {
		pa.word = w.str(p.Exp.Word)
		pa.hint = pa.word.s
	}
	return pa
}

// positionals expands $@ or $* (star).
func (e *expander) positionals(star, quoted bool) {
	w := e.w
	if !w.posKnown {
		e.mark("")
		return
	}
	// Each parameter is its own word ("$@"), or all are one ("$*"): one
	// only the run knows is that word alone, not every word of the list.
	for i, f := range w.pos {
		if i > 0 {
			switch {
			case star && quoted:
				e.addValue(" ", true)
			case quoted:
				e.flush()
				e.started = true
			default:
				e.addValue(" ", false)
			}
		}
		e.addField(f, quoted)
	}
}

// addField adds a word the walk already expanded: its text as a value if
// known, else as it is, with the marks of its unknown parts.
func (e *expander) addField(f field, quoted bool) {
	if !f.dyn {
		e.addValue(f.s, quoted)
		return
	}
	e.room(len(f.s))
	e.cur = append(e.cur, f.s...)
	e.f.dyn = true
	e.started = true
	if f.hint != "" {
		e.addHint(f.hint)
	}
}

// positional expands $n.
func (e *expander) positional(n int, quoted bool) {
	w := e.w
	switch {
	case n == 0 || !w.posKnown:
		e.mark("")
	case n > len(w.pos):
		e.addValue("", quoted)
	default:
		e.addField(w.pos[n-1], quoted)
	}
}

// indexed expands ${v[i]}, ${v[@]} and ${v[*]} of a known value.
func (e *expander) indexed(v value, index syntax.ArithmExpr, quoted bool) {
	idx := ""
	if wd, ok := index.(*syntax.Word); ok {
		idx = wd.Lit()
	}
	switch {
	case idx == "@" || idx == "*":
		if v.arr {
			e.addList(v.list, quoted && idx == "@")
		} else {
			e.addValue(v.s, quoted)
		}
		return
	case idx == "0" && !v.arr:
		e.addValue(v.s, quoted)
		return
	}
	n, err := strconv.Atoi(idx)
	switch {
	case err != nil || !v.arr || n < 0:
		e.mark(e.w.hintOf(v))
	case n < len(v.list):
		e.addValue(v.list[n], quoted)
	default:
		e.addValue("", quoted)
	}
}

// ansiC decodes the body of a $'...' string.
func ansiC(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	var b []byte
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch != '\\' || i+1 >= len(s) {
			b = append(b, ch)
			continue
		}
		i++
		switch c := s[i]; c {
		case 'n':
			b = append(b, '\n')
		case 't':
			b = append(b, '\t')
		case 'r':
			b = append(b, '\r')
		case 'a':
			b = append(b, 7)
		case 'b':
			b = append(b, 8)
		case 'e', 'E':
			b = append(b, 27)
		case 'f':
			b = append(b, 12)
		case 'v':
			b = append(b, 11)
		case 'c':
			if i+1 < len(s) {
				i++
				b = append(b, s[i]&0x1f)
			}
		case 'x', 'u', 'U':
			max := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
			j := i + 1
			for j < len(s) && j-i-1 < max && isHex(s[j]) {
				j++
			}
			if j == i+1 {
				b = append(b, '\\', c)
				continue
			}
			n, _ := strconv.ParseUint(s[i+1:j], 16, 32)
			if c == 'x' {
				b = append(b, byte(n))
			} else {
				b = utf8.AppendRune(b, rune(n))
			}
			i = j - 1
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j := i
			for j < len(s) && j-i < 3 && s[j] >= '0' && s[j] <= '7' {
				j++
			}
			n, _ := strconv.ParseUint(s[i:j], 8, 16)
			b = append(b, byte(n))
			i = j - 1
		default:
			b = append(b, c)
		}
	}
	return string(b)
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// braces expands the comma form of brace expansion ({a,b} and nested),
// as bash does before anything else; a sequence ({1..9}) or a group it
// cannot split is left as a glob, which makes a command word dynamic.
func braces(dst []field, f field, n int) []field {
	s := f.s
	open := -1
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{':
			if depth == 0 {
				open = i
			}
			depth++
		case '}':
			if depth == 0 {
				continue
			}
			depth--
			if depth != 0 {
				continue
			}
			body := s[open+1 : i]
			var alts []string
			d, last := 0, 0
			for j := 0; j < len(body); j++ {
				switch body[j] {
				case '{':
					d++
				case '}':
					d--
				case ',':
					if d == 0 {
						alts = append(alts, body[last:j])
						last = j + 1
					}
				}
			}
			if alts == nil {
				if strings.Contains(body, "..") {
					f.brace, f.glob = false, true
					return append(dst, f)
				}
				open = -1
				continue
			}
			alts = append(alts, body[last:])
			if n > 4 || len(dst)+len(alts) > 64 {
				f.brace, f.glob = false, true
				return append(dst, f)
			}
			for _, a := range alts {
				g := f
				g.s = s[:open] + a + s[i+1:]
				dst = braces(dst, g, n+1)
			}
			return dst
		}
	}
	f.brace = false
	return append(dst, f)
}
