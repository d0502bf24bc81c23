package vmgate

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"mvdan.cc/sh/v3/pattern"
	"mvdan.cc/sh/v3/syntax"
)

// operate evaluates a parameter expansion with an operator, as bash does,
// when its variable and operands are known: ${X:1} and ${X:1:3}, ${X/q/i}
// and its forms, ${X#p} ${X%p} and their long forms, ${X^^} ${X,,} and
// theirs, ${#X}, and the defaults ${X:-w} and the like. false: something
// in it is known only at run time, or the form is not followed.
func (w *walker) operate(p *syntax.ParamExp, pa paramArgs) (string, bool) {
	if p.Param.Value == "@" || p.Param.Value == "*" {
		return "", false
	}
	v, ok := w.paramValue(p)
	if !ok {
		return "", false
	}
	var out string
	switch {
	case p.Length:
		out = strconv.Itoa(utf8.RuneCountInString(v))
	case p.Slice != nil:
		out, ok = w.slice(v, p.Slice)
	case p.Repl != nil:
		out, ok = w.replace(v, p.Repl, pa)
	case p.Exp != nil:
		out, ok = w.expOp(v, p.Exp, pa)
	default:
		return "", false
	}
	if !ok || !w.charge(len(v)+2*len(out)) {
		return "", false
	}
	return out, true
}

// paramValue is the known value of an expansion's variable (or element,
// or positional parameter).
func (w *walker) paramValue(p *syntax.ParamExp) (string, bool) {
	name := p.Param.Value
	if n, err := strconv.Atoi(name); err == nil {
		if n == 0 || !w.posKnown || p.Index != nil {
			return "", false
		}
		if n > len(w.pos) {
			return "", true
		}
		f := w.pos[n-1]
		return f.s, !f.dyn
	}
	v, ok := w.vars[name]
	if !ok || !v.known {
		return "", false
	}
	if p.Index != nil {
		i, ok := w.arithInt(p.Index)
		switch {
		case !ok:
			return "", false
		case !v.arr:
			return v.s, i == 0
		case i >= 0 && i < len(v.list):
			return v.list[i], true
		case i >= 0:
			return "", true
		}
		return "", false
	}
	if v.arr {
		if len(v.list) == 0 {
			return "", true
		}
		return v.list[0], true
	}
	return v.s, true
}

// slice is ${v:offset} and ${v:offset:length}, in characters; a negative
// offset counts from the end, and so does a negative length.
func (w *walker) slice(v string, sl *syntax.Slice) (string, bool) {
	rs := []rune(v)
	pos := func(n int) int {
		if n < 0 {
			if n += len(rs); n < 0 {
				return len(rs) // bash: an offset before the start is empty
			}
		}
		return min(n, len(rs))
	}
	if sl.Offset != nil {
		off, ok := w.arithInt(sl.Offset)
		if !ok {
			return "", false
		}
		rs = rs[pos(off):]
	}
	if sl.Length != nil {
		n, ok := w.arithInt(sl.Length)
		if !ok {
			return "", false
		}
		rs = rs[:pos(n)]
	}
	return string(rs), true
}

// replace is ${v/pat/with}, ${v//pat/with}, and ${v/#pat/with} and
// ${v/%pat/with} anchored at the start and the end.
func (w *walker) replace(v string, r *syntax.Replace, pa paramArgs) (string, bool) {
	pat, ok := w.pattern(r.Orig, pa.orig)
	if !ok || pa.with.dyn {
		return "", false
	}
	// bash 5.2 reads & in the replacement as the match (patsub_replacement):
	// not followed.
	if r.With != nil && strings.ContainsAny(pa.with.s, "&\\") {
		return "", false
	}
	anchor := byte(0)
	if !r.All && pat != "" && (pat[0] == '#' || pat[0] == '%') && firstLit(r.Orig) {
		anchor, pat = pat[0], pat[1:]
	}
	if pat == "" && anchor == 0 {
		return v, true // nothing to replace
	}
	expr, err := pattern.Regexp(pat, 0)
	if err != nil {
		return "", false
	}
	switch anchor {
	case '#':
		expr = "^(?:" + expr + ")"
	case '%':
		expr = "(?:" + expr + ")$"
	}
	rx, err := regexp.Compile(expr)
	if err != nil {
		return "", false
	}
	n := 1
	if r.All {
		n = -1
	}
	var b strings.Builder
	last := 0
	for _, loc := range rx.FindAllStringIndex(v, n) {
		if anchor == '%' && loc[1] != len(v) {
			continue
		}
		b.WriteString(v[last:loc[0]])
		b.WriteString(pa.with.s)
		last = loc[1]
	}
	b.WriteString(v[last:])
	return b.String(), true
}

// firstLit says whether a pattern word starts with its literal text: a
// # or % there anchors the pattern; a quoted one is a character.
func firstLit(w *syntax.Word) bool {
	if w == nil || len(w.Parts) == 0 {
		return false
	}
	_, ok := w.Parts[0].(*syntax.Lit)
	return ok
}

// pattern is a pattern word as a pattern: its quoted parts match
// themselves. Only literal parts are followed.
func (w *walker) pattern(word *syntax.Word, f field) (string, bool) {
	if word == nil {
		return "", true
	}
	if f.dyn {
		return "", false
	}
	var b strings.Builder
	for _, p := range word.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			b.WriteString(p.Value)
		case *syntax.SglQuoted:
			if p.Dollar {
				b.WriteString(pattern.QuoteMeta(ansiC(p.Value), 0))
			} else {
				b.WriteString(pattern.QuoteMeta(p.Value, 0))
			}
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(pattern.QuoteMeta(l.Value, 0))
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

// expOp is ${v#p} and the like, ${v^^} and the like, and the defaults.
func (w *walker) expOp(v string, e *syntax.Expansion, pa paramArgs) (string, bool) {
	switch e.Op {
	case syntax.RemSmallPrefix, syntax.RemLargePrefix, syntax.RemSmallSuffix, syntax.RemLargeSuffix:
		pat, ok := w.pattern(e.Word, pa.word)
		if !ok {
			return "", false
		}
		return removePattern(v, pat, e.Op == syntax.RemSmallSuffix || e.Op == syntax.RemLargeSuffix,
			e.Op == syntax.RemSmallPrefix || e.Op == syntax.RemSmallSuffix)
	case syntax.UpperFirst, syntax.UpperAll, syntax.LowerFirst, syntax.LowerAll:
		pat, ok := w.pattern(e.Word, pa.word)
		if !ok {
			return "", false
		}
		return caseConv(v, pat, e.Op)
	case syntax.DefaultUnsetOrNull, syntax.AssignUnsetOrNull:
		if v != "" {
			return v, true
		}
		return pa.word.s, !pa.word.dyn
	case syntax.AlternateUnsetOrNull:
		if v == "" {
			return "", true
		}
		return pa.word.s, !pa.word.dyn
	case syntax.DefaultUnset, syntax.AssignUnset, syntax.ErrorUnset, syntax.ErrorUnsetOrNull:
		// Set and not empty: its value. Empty, it may be unset: the gate
		// does not tell unset from empty.
		return v, v != ""
	case syntax.AlternateUnset:
		return pa.word.s, v != "" && !pa.word.dyn
	}
	return "", false
}

// removePattern is ${v#p}, ${v##p}, ${v%p} and ${v%%p}, as mvdan.cc/sh's
// expand does them.
func removePattern(v, pat string, fromEnd, shortest bool) (string, bool) {
	var mode pattern.Mode
	if shortest {
		mode |= pattern.Shortest
	}
	expr, err := pattern.Regexp(pat, mode)
	if err != nil {
		return "", false
	}
	switch {
	case fromEnd && shortest:
		expr = ".*(" + expr + ")$" // the right-most shortest match
	case fromEnd:
		expr = "(" + expr + ")$"
	default:
		expr = "^(" + expr + ")"
	}
	rx, err := regexp.Compile(expr)
	if err != nil {
		return "", false
	}
	if loc := rx.FindStringSubmatchIndex(v); loc != nil {
		v = v[:loc[2]] + v[loc[3]:]
	}
	return v, true
}

// caseConv is ${v^p}, ${v^^p}, ${v,p} and ${v,,p}: the characters that
// match p (any, when p is empty), the first or all.
func caseConv(v, pat string, op syntax.ParExpOperator) (string, bool) {
	conv := unicode.ToLower
	if op == syntax.UpperFirst || op == syntax.UpperAll {
		conv = unicode.ToUpper
	}
	all := op == syntax.UpperAll || op == syntax.LowerAll
	if pat == "" {
		pat = "?"
	}
	expr, err := pattern.Regexp(pat, 0)
	if err != nil {
		return "", false
	}
	rx, err := regexp.Compile("^(?:" + expr + ")$")
	if err != nil {
		return "", false
	}
	rs := []rune(v)
	for i, r := range rs {
		if rx.MatchString(string(r)) {
			rs[i] = conv(r)
		}
		if !all {
			break
		}
	}
	return string(rs), true
}

// arithInt evaluates what arithmetic the gate follows: numbers, known
// variables, + - * / % and parentheses.
func (w *walker) arithInt(x syntax.ArithmExpr) (int, bool) {
	switch x := x.(type) {
	case *syntax.Word:
		name := x.Lit()
		if n, err := strconv.Atoi(name); err == nil {
			return n, true
		}
		if len(x.Parts) == 1 {
			// $n and ${n}: a plain expansion of a variable.
			if pe, ok := x.Parts[0].(*syntax.ParamExp); ok && pe.Param != nil && pe.Exp == nil && pe.Repl == nil &&
				pe.Slice == nil && pe.Index == nil && !pe.Length && !pe.Excl && pe.NestedParam == nil {
				name = pe.Param.Value
			}
		}
		if !isName(name) {
			return 0, false
		}
		v, ok := w.vars[name]
		if !ok || !v.known || v.arr {
			return 0, false
		}
		n, err := strconv.Atoi(strings.TrimSpace(v.s))
		return n, err == nil
	case *syntax.ParenArithm:
		return w.arithInt(x.X)
	case *syntax.UnaryArithm:
		n, ok := w.arithInt(x.X)
		switch {
		case !ok || x.Post:
			return 0, false
		case x.Op == syntax.Minus:
			return -n, true
		case x.Op == syntax.Plus:
			return n, true
		}
	case *syntax.BinaryArithm:
		a, ok1 := w.arithInt(x.X)
		b, ok2 := w.arithInt(x.Y)
		if !ok1 || !ok2 {
			return 0, false
		}
		switch x.Op {
		case syntax.Add:
			return a + b, true
		case syntax.Sub:
			return a - b, true
		case syntax.Mul:
			return a * b, true
		case syntax.Quo:
			return a / max(b, 1), b != 0
		case syntax.Rem:
			return a % max(b, 1), b != 0
		}
	}
	return 0, false
}
