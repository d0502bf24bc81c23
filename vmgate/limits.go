package vmgate

import "strings"

// Limits of what the gate reads, checked by one scan of the text before
// the parse, for the script and for every string parsed again as code.
//
// The parser recurses once for each level of nesting, and Go cannot
// recover from a stack that outgrows its limit: 300 KB of "(" took down
// spoold, and every attempt after, as a fatal error, not a panic. The
// parser also recurses once for each operator of a test or an arithmetic
// expression (1 MiB of `[[ ! ! ... a ]]` held 836 MB of stack), and for
// each `time`, `coproc` or `name()` that starts a command. So the scan
// counts all of these as levels, and every node the tree may hold: a
// script past a limit is undecidable (refused) before it is parsed, and
// the tree of one that passes is bounded by construction (treeBytes a
// node).
const (
	// MaxScript bounds a script's size in bytes.
	MaxScript = 1 << 20
	// MaxNesting bounds how deep a script's constructs nest, as the scan
	// measures it: brackets, quotes, compound commands and the operators
	// of tests and arithmetic.
	MaxNesting = 200
	// MaxNodes bounds the words, operators and parts of words a script
	// may hold: about 1 MiB of dense shell, far more than any script an
	// agent writes, and a tree of at most MaxNodes*treeBytes.
	MaxNodes = 1 << 18
)

// treeBytes bounds what the parser allocates for one node the scan
// counts (measured over the densest shapes, a pipe of one-letter commands
// being the worst at about 200 bytes; TestTreeBytes keeps it honest).
const treeBytes = 256

// scan is what the scan before the parse finds.
type scan struct {
	depth int // how deep the constructs nest, or MaxNesting+1 once past it
	at    int // the byte offset where depth passed MaxNesting
	nodes int // an upper bound of the tree's nodes, or MaxNodes+1 once past it
}

func (s scan) tooDeep() bool { return s.depth > MaxNesting }
func (s scan) tooMany() bool { return s.nodes > MaxNodes }

// nesting returns an upper bound of how deep the constructs of src nest,
// or MaxNesting+1 as soon as the bound passes MaxNesting, with the byte
// offset there.
func nesting(src string) (depth, at int) {
	s := measure(src)
	return s.depth, s.at
}

// measure scans src: how deep its constructs nest ((, {, [, $(, ${,
// backquotes, double quotes holding substitutions, the compound commands
// if, while, until, for, select and case, every operator inside [[ ]] and
// arithmetic, and the commands the parser reads by recursion), and how
// many nodes its tree may have. It stops at the first limit passed.
//
// It over-counts rather than under-counts where it must guess (a keyword
// word anywhere a command may start counts), and reads as the parser does
// what cannot nest: comments, single-quoted text and the bodies of quoted
// here-documents, so that prose full of "if" and "(" in a here-document or
// a comment is no wall.
func measure(src string) scan {
	n := &nester{src: src, stack: make([]byte, 0, 32), cmdStart: true, atCmd: true}
	for i := 0; i < len(src); i++ {
		var over bool
		if n.top() == kDQ {
			i, over = n.quoted(i)
		} else {
			i, over = n.step(i)
		}
		if over || n.nodes > MaxNodes {
			return scan{depth: max(n.maxd, len(n.stack)), at: i, nodes: n.nodes}
		}
	}
	return scan{depth: n.maxd, nodes: n.nodes}
}

// The frames of nesting's stack.
const (
	kCode  = 'c' // a command list: (, $(, {, [, a case
	kDQ    = '"' // inside double quotes
	kBQ    = '`' // inside backquotes (code)
	kCase  = 'k' // inside case ... esac: a lone ")" closes a pattern, not a frame
	kWord  = 'w' // inside if/while/until/for/select ... fi/done
	kTest  = 't' // inside [[ ]], or a ( ) of it
	kArith = 'a' // inside (( )), $(( )), or a ( ) in arithmetic
	kIndex = 'i' // inside $[ ] or an index a[ ]: arithmetic, closed by ]
	kParam = 'p' // inside ${ }
	kSlice = 's' // inside ${name: ...}, an arithmetic offset and length
	kArray = 'r' // inside an array's ( ) after = or +=
	// The levels the parser recurses for without a bracket: each is held
	// until its expression's frame closes (kOp), or its command ends
	// (kCmd for time, coproc, function and name(), kLet for let's
	// arguments, whose operators are counted as arithmetic's).
	kOp  = 'o'
	kCmd = 'm'
	kLet = 'l'
)

// The frames each closing character closes.
const (
	closedByParen   = string(kCode) + string(kArith) + string(kTest) + string(kArray)
	closedByBrace   = string(kCode) + string(kParam) + string(kSlice)
	closedByBracket = string(kCode) + string(kIndex)
)

// nester is nesting's scan: each step reads the byte at i (and whatever it
// must read past it) and returns the index of the last byte it read, and
// whether the stack passed MaxNesting there.
type nester struct {
	src      string
	stack    []byte
	maxd     int
	nodes    int
	heredocs []heredoc // announced on this line; their bodies follow it
	cmdStart bool      // the next word may be a command (and so a keyword)
	// atCmd: the next word is where a command starts, strictly (after a
	// separator or a keyword): only there does [[ open a test.
	atCmd bool
	// after time (its -p keeps atCmd), function or coproc (their name).
	keepNext string
}

func (n *nester) top() byte {
	if len(n.stack) == 0 {
		return kCode
	}
	return n.stack[len(n.stack)-1]
}

// ctx is the innermost frame that is not a held level: where the next
// byte is read.
func (n *nester) ctx() byte {
	for i := len(n.stack) - 1; i >= 0; i-- {
		switch k := n.stack[i]; k {
		case kOp, kCmd:
		default:
			return k
		}
	}
	return kCode
}

// setCtx changes the kind of the innermost frame that is not a held
// level: ${name: turns out to be a slice.
func (n *nester) setCtx(k byte) {
	for i := len(n.stack) - 1; i >= 0; i-- {
		if n.stack[i] != kOp && n.stack[i] != kCmd {
			n.stack[i] = k
			return
		}
	}
}

// expr says whether k is a frame whose operators the parser recurses for.
func expr(k byte) bool { return k == kArith || k == kIndex || k == kSlice || k == kLet }

// push adds a frame and says whether the stack passed MaxNesting.
func (n *nester) push(k byte) bool {
	n.stack = append(n.stack, k)
	n.maxd = max(n.maxd, len(n.stack))
	return len(n.stack) > MaxNesting
}

// release drops the held levels on top of the stack.
func (n *nester) release() {
	for len(n.stack) > 0 {
		switch n.stack[len(n.stack)-1] {
		case kOp, kCmd, kLet:
			n.stack = n.stack[:len(n.stack)-1]
		default:
			return
		}
	}
}

// pop closes the innermost frame, with the levels held in it, if it is
// one of kinds. A closing byte that closes nothing (} in arithmetic is a
// word) releases nothing: the levels counted stay counted.
func (n *nester) pop(kinds string) {
	for i := len(n.stack) - 1; i >= 0; i-- {
		switch k := n.stack[i]; k {
		case kOp, kCmd, kLet:
			continue
		default:
			if strings.IndexByte(kinds, k) >= 0 {
				n.stack = n.stack[:i]
			}
		}
		return
	}
}

// endCommand releases the levels a command held (time, let...), at the
// command's end: a separator or a newline outside an expression.
func (n *nester) endCommand() {
	for len(n.stack) > 0 {
		switch n.stack[len(n.stack)-1] {
		case kCmd, kLet:
			n.stack = n.stack[:len(n.stack)-1]
		case kOp:
			// an operator of a command's let, or a ! of its own
			k := n.ctx()
			if k == kTest || k == kArith || k == kSlice {
				return
			}
			n.stack = n.stack[:len(n.stack)-1]
		default:
			return
		}
	}
}

// endLet ends let's arguments, with their operators, at | && or ||.
func (n *nester) endLet() {
	for i := len(n.stack) - 1; i >= 0; i-- {
		switch n.stack[i] {
		case kOp:
		case kLet:
			n.stack = n.stack[:i]
			return
		default:
			return
		}
	}
}

// quoted reads a byte inside double quotes.
func (n *nester) quoted(i int) (int, bool) {
	src := n.src
	switch src[i] {
	case '\\':
		n.nodes++
		i++
	case '"':
		n.nodes++
		n.pop(string(kDQ))
	case '`':
		n.nodes++
		n.atCmd, n.cmdStart = true, true
		return i, n.push(kBQ)
	case '$':
		n.nodes += 2 // the expansion, and the name or word in it
		return n.dollar(i)
	}
	return i, false
}

// dollar reads $( $(( ${ $[ at i: the frame each opens.
func (n *nester) dollar(i int) (int, bool) {
	src := n.src
	if i+1 >= len(src) {
		return i, false
	}
	switch src[i+1] {
	case '(':
		n.nodes++
		if i+2 < len(src) && src[i+2] == '(' {
			n.nodes++
			return i + 2, n.push(kArith) || n.push(kArith)
		}
		n.cmdStart, n.atCmd = true, true
		return i + 1, n.push(kCode)
	case '{':
		n.nodes++
		return i + 1, n.push(kParam)
	case '[':
		n.nodes++
		return i + 1, n.push(kIndex)
	}
	return i, false
}

// isName says whether c may be part of a variable's name.
func isNameByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// special bytes end a word in code; in an expression the operators too.
const (
	codeSpecial = " \t\n;&|()<>{}[]!$\"'`=\\"
	exprSpecial = codeSpecial + "~+-*/%^?:,"
)

// specials are codeSpecial and exprSpecial as tables: the scan reads
// every byte of up to a MiB.
var specials = func() (t [3][256]bool) {
	for _, c := range []byte(codeSpecial) {
		t[0][c] = true
		t[2][c] = true
	}
	for _, c := range []byte(exprSpecial) {
		t[1][c] = true
	}
	t[2][':'] = true // ${name: starts a slice
	return t
}()

func specialIn(k byte) *[256]bool {
	switch {
	case expr(k):
		return &specials[1]
	case k == kParam:
		return &specials[2]
	}
	return &specials[0]
}

// step reads a byte outside double quotes.
func (n *nester) step(i int) (int, bool) {
	src, c := n.src, n.src[i]
	k := n.ctx()
	special := specialIn(k)
	if !special[c] && c != '#' {
		// a word: one node where it starts
		if i == 0 || special[src[i-1]] {
			n.nodes++
		}
		return n.word(i, k)
	}
	if c != ' ' && c != '\t' {
		n.nodes++
	}
	// Where a command starts, strictly: after a separator or an opening,
	// set below; after any other byte, not.
	wasAtCmd := n.atCmd
	n.atCmd = false
	switch c {
	case '\\':
		n.cmdStart = false
		return i + 1, false
	case '\'':
		// $'...' takes backslash escapes; '...' takes none.
		ansi := i > 0 && src[i-1] == '$'
		for i++; i < len(src) && src[i] != '\''; i++ {
			if ansi && src[i] == '\\' {
				i++
			}
		}
		n.cmdStart = false
	case '"':
		n.cmdStart = false
		return i, n.push(kDQ)
	case '`':
		n.cmdStart = true
		if n.top() == kBQ {
			n.pop(string(kBQ))
			return i, false
		}
		n.atCmd = true
		return i, n.push(kBQ)
	case '$':
		n.cmdStart = false
		return n.dollar(i)
	case '(':
		n.cmdStart, n.atCmd = true, true
		switch {
		case expr(k):
			return i, n.push(kArith)
		case k == kTest:
			return i, n.push(kTest)
		case i+1 < len(src) && src[i+1] == '(':
			return i, n.push(kArith) // ((: arithmetic (its second ( pushes again)
		case i > 0 && src[i-1] == '=':
			return i, n.push(kArray)
		}
		return i, n.push(kCode)
	case ')':
		n.cmdStart = false
		if k == kCase {
			n.release()
			n.atCmd = true // a pattern's end: case a) ...
			break
		}
		n.pop(closedByParen)
		if j := strings.TrimRight(src[:i], " \t"); len(j) > 0 && j[len(j)-1] == '(' && !expr(k) {
			// name() or name ( ): a function, whose body the parser
			// reads by recursion.
			n.atCmd = true
			return i, n.push(kCmd)
		}
	case '{':
		n.cmdStart, n.atCmd = true, true
		return i, n.push(kCode)
	case '}':
		n.pop(closedByBrace)
		n.cmdStart = false
	case '[':
		n.cmdStart = true
		prev := byte(' ')
		if i > 0 {
			prev = src[i-1]
		}
		switch {
		case wasAtCmd && k != kTest && i+1 < len(src) && src[i+1] == '[' &&
			(i+2 >= len(src) || strings.IndexByte(" \t\n", src[i+2]) >= 0):
			n.nodes++
			return i + 1, n.push(kTest)
		case expr(k), isNameByte(prev), k == kArray && (prev == '(' || prev == ' ' || prev == '\t' || prev == '\n'):
			return i, n.push(kIndex) // an index: a[i], ${a[i]}, ([i]=v)
		}
		return i, n.push(kCode)
	case ']':
		n.cmdStart = false
		if k == kTest && i+1 < len(src) && src[i+1] == ']' && (i+2 >= len(src) || strings.IndexByte(" \t\n;&|)", src[i+2]) >= 0) {
			n.pop(string(kTest))
			return i + 1, false
		}
		n.pop(closedByBracket)
	case '#':
		// A comment where a word may start, in code; in an expression or a
		// test it is a word (16#ff), read as one.
		if !expr(k) && k != kTest && k != kParam && (i == 0 || strings.IndexByte(" \t\n;&|()", src[i-1]) >= 0) {
			n.nodes--
			for i+1 < len(src) && src[i+1] != '\n' {
				i++
			}
		}
	case '<':
		if !expr(k) && k != kTest && i+2 < len(src) && src[i+1] == '<' && src[i+2] != '<' {
			h, j := readHeredocWord(src[i+2:])
			if h.delim != "" {
				n.heredocs = append(n.heredocs, h)
			}
			i += 1 + j
		} else if expr(k) {
			return i, n.push(kOp)
		}
	case '\n':
		n.cmdStart = true
		if k != kTest && !expr(k) || k == kLet {
			n.endCommand()
			n.atCmd = true
		}
		return n.newline(i)
	case ';', '&', '|':
		n.cmdStart = true
		switch {
		case k == kTest && c != ';':
			if i > 0 && src[i-1] == c {
				break // the second of && or ||: one level for both
			}
			return i, n.push(kOp)
		case expr(k) && k != kLet && c != ';':
			return i, n.push(kOp)
		case k == kLet && c != ';' && i > 0 && src[i-1] != ' ' && src[i-1] != '\t':
			// let a&b|c: joined to a word, arithmetic's (a separator
			// too, maybe: counted, the command goes on to the line's end)
			return i, n.push(kOp)
		case expr(k) && k != kLet:
		case c == '|' || c == '&' && (i+1 < len(src) && src[i+1] == '&' || i > 0 && src[i-1] == '&'):
			// | && ||: time and coproc take the rest of a pipeline, and a
			// function's body the rest of a && chain, the parser reading
			// them inside: their levels are held to ; & or the line's end.
			n.endLet()
			n.atCmd = true
		default:
			n.endCommand()
			n.atCmd = true
		}
	case '!':
		n.cmdStart = true
		if k == kParam || k == kCode || k == kBQ || k == kCase || k == kWord || k == kArray {
			// ! cmd, ${!name}, [!a]: held to the command's or frame's end
			n.atCmd = k != kParam
		}
		return i, n.push(kOp)
	case ':':
		// ${name:offset:length}, unless it is ${name:-word} and the like.
		if k == kParam && (i+1 >= len(src) || strings.IndexByte("-=?+", src[i+1]) < 0) {
			n.setCtx(kSlice)
		} else if expr(k) {
			return i, n.push(kOp)
		}
	case '~', '+', '-', '*', '/', '%', '^', '?', ',', '=', '>':
		if expr(k) {
			return i, n.push(kOp)
		}
	case ' ', '\t':
		n.atCmd = wasAtCmd
	}
	return i, false
}

// newline reads, after the newline at i, the bodies of the here-documents
// its line announced, one after the other.
func (n *nester) newline(i int) (int, bool) {
	if len(n.heredocs) == 0 {
		return i, false
	}
	pos := i + 1
	for _, h := range n.heredocs {
		body, k := heredocBody(n.src[min(pos, len(n.src)):], h)
		if h.quoted {
			n.nodes++
		} else {
			// An unquoted body expands $(...) and ${...}: measured as
			// text in double quotes, on top of where it stands.
			s := measure(`"` + body)
			n.nodes += s.nodes
			n.maxd = max(n.maxd, len(n.stack)+s.depth)
			if n.maxd > MaxNesting || n.nodes > MaxNodes {
				return i, true
			}
		}
		pos += k + 1
	}
	n.heredocs = n.heredocs[:0]
	return pos - 2, false // the loop's i++ lands on the last body's closing newline
}

// word reads a word: where a command may start a keyword opens or closes
// a frame, and time, coproc, function and let hold a level for the
// command they start.
func (n *nester) word(i int, k byte) (int, bool) {
	src := n.src
	special := specialIn(k)
	j := i
	for j < len(src) && !special[src[j]] {
		j++
	}
	w := src[i:j]
	atCmd, keep := n.atCmd, n.keepNext
	n.keepNext = ""
	n.atCmd = false
	if expr(k) || k == kTest || k == kParam || k == kSlice {
		n.cmdStart = false
		return j - 1, false
	}
	if keep != "" && (keep != "time" || w == "-p") {
		n.atCmd = atCmd // time -p [[, function f [[, coproc c [[
	}
	switch w {
	case "time", "coproc", "function":
		n.atCmd, n.keepNext = true, w
		if n.push(kCmd) {
			return i, true
		}
	case "let":
		if n.push(kLet) {
			return i, true
		}
	}
	// A keyword is a word of its own: done=1 and fi} are not.
	keyword := j >= len(src) || strings.IndexByte(" \t\n;&|()<>", src[j]) >= 0
	if !n.cmdStart || !keyword || w == "" || strings.IndexFunc(w, func(r rune) bool { return r < 'a' || r > 'z' }) >= 0 {
		n.cmdStart = false
		return j - 1, false
	}
	// then, do, else, in...: a command may follow.
	n.cmdStart = true
	if !atCmd && (w == "fi" || w == "done" || w == "esac") {
		// Only a command position closes a frame: echo fi does not, or
		// a frame could be closed that the parser keeps open.
		return j - 1, false
	}
	switch w {
	case "if", "while", "until", "for", "select":
		n.atCmd = true
		if n.push(kWord) {
			return i, true
		}
	case "then", "do", "else", "elif":
		n.atCmd = true
	case "case":
		if n.push(kCase) {
			return i, true
		}
	case "fi", "done":
		n.pop(string(kWord))
	case "esac":
		n.pop(string(kCase))
	}
	return j - 1, false
}

type heredoc struct {
	delim  string
	quoted bool // <<'EOF', <<"EOF", <<\EOF: the body is read as is
	dash   bool // <<-: leading tabs are stripped
}

// readHeredocWord reads the word after "<<" in s, returning the
// here-document it opens and how many bytes of s it used.
func readHeredocWord(s string) (heredoc, int) {
	var h heredoc
	i := 0
	if i < len(s) && s[i] == '-' {
		h.dash = true
		i++
	}
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	var b strings.Builder
	for i < len(s) && strings.IndexByte(" \t\n;&|<>()", s[i]) < 0 {
		switch c := s[i]; c {
		case '\'', '"':
			h.quoted = true
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				return heredoc{}, i
			}
			b.WriteString(s[i+1 : i+1+j])
			i += j + 2
			continue
		case '\\':
			h.quoted = true
			if i+1 < len(s) {
				b.WriteByte(s[i+1])
			}
			i += 2
			continue
		}
		b.WriteByte(s[i])
		i++
	}
	h.delim = b.String()
	return h, i
}

// heredocBody returns the body of h at the start of s and how many bytes
// it takes with its closing line (all of s when the delimiter never comes).
func heredocBody(s string, h heredoc) (string, int) {
	off := 0
	for off < len(s) {
		end := strings.IndexByte(s[off:], '\n')
		line := s[off:]
		if end >= 0 {
			line = s[off : off+end]
		}
		if h.dash {
			line = strings.TrimLeft(line, "\t")
		}
		if line == h.delim {
			if end < 0 {
				return s[:off], len(s)
			}
			return s[:off], off + end
		}
		if end < 0 {
			break
		}
		off += end + 1
	}
	return s, len(s)
}
