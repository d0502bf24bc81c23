package vmgate

import "strings"

// Limits of what the gate reads. The parser recurses once for each level
// of nesting, and Go cannot recover from a stack that outgrows its limit:
// 300 KB of "(" took down spoold, and every attempt after, as a fatal
// error, not a panic. So the nesting is measured before the parse by a
// scan that costs one pass and no allocation, and a script past either
// limit is undecidable (refused): no real script nests 200 levels, and the
// limits keep a decision under a few hundred MB and a second or so.
const (
	// MaxScript bounds a script's size in bytes.
	MaxScript = 1 << 20
	// MaxNesting bounds how deep a script's constructs nest, as nesting
	// measures it.
	MaxNesting = 200
)

// nesting returns an upper bound of how deep the constructs of src nest
// ((, {, [, $(, ${, backquotes, double quotes holding substitutions, and the
// compound commands if, while, until, for, select and case), or MaxNesting+1
// as soon as the bound passes MaxNesting, with the byte offset there.
//
// It over-counts rather than under-counts where it must guess (a keyword
// word anywhere a command may start counts), and reads as the parser does
// what cannot nest: comments, single-quoted text and the bodies of quoted
// here-documents, so that prose full of "if" and "(" in a here-document or
// a comment is no wall.
func nesting(src string) (depth, at int) {
	n := &nester{src: src, stack: make([]byte, 0, 32), cmdStart: true}
	for i := 0; i < len(src); i++ {
		var over bool
		if n.top() == kDQ {
			i, over = n.quoted(i)
		} else {
			i, over = n.step(i)
		}
		if over {
			return MaxNesting + 1, i
		}
	}
	return n.maxd, 0
}

// The frames of nesting's stack.
const (
	kCode = 'c' // a command list: (, $(, {, ${, [, a case
	kDQ   = '"' // inside double quotes
	kBQ   = '`' // inside backquotes (code)
	kCase = 'k' // inside case ... esac: a lone ")" closes a pattern, not a frame
	kWord = 'w' // inside if/while/until/for/select ... fi/done
)

// nester is nesting's scan: each step reads the byte at i (and whatever it
// must read past it) and returns the index of the last byte it read, and
// whether the stack passed MaxNesting there.
type nester struct {
	src      string
	stack    []byte
	maxd     int
	heredocs []heredoc // announced on this line; their bodies follow it
	cmdStart bool      // the next word may be a command (and so a keyword)
}

func (n *nester) top() byte {
	if len(n.stack) == 0 {
		return kCode
	}
	return n.stack[len(n.stack)-1]
}

// push adds a frame and says whether the stack passed MaxNesting.
func (n *nester) push(k byte) bool {
	n.stack = append(n.stack, k)
	n.maxd = max(n.maxd, len(n.stack))
	return len(n.stack) > MaxNesting
}

func (n *nester) pop(k byte) {
	if len(n.stack) > 0 && n.stack[len(n.stack)-1] == k {
		n.stack = n.stack[:len(n.stack)-1]
	}
}

// quoted reads a byte inside double quotes.
func (n *nester) quoted(i int) (int, bool) {
	src := n.src
	switch src[i] {
	case '\\':
		i++
	case '"':
		n.pop(kDQ)
	case '`':
		return i, n.push(kBQ)
	case '$':
		if i+1 < len(src) && (src[i+1] == '(' || src[i+1] == '{') {
			i++
			n.cmdStart = true
			return i, n.push(kCode)
		}
	}
	return i, false
}

// step reads a byte of code.
func (n *nester) step(i int) (int, bool) {
	src, c := n.src, n.src[i]
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
			n.pop(kBQ)
			return i, false
		}
		return i, n.push(kBQ)
	case '(', '{', '[':
		n.cmdStart = true
		return i, n.push(kCode)
	case ')':
		if n.top() == kCase {
			break // a pattern's end: case a) ...
		}
		n.pop(kCode)
		n.cmdStart = false
	case '}', ']':
		n.pop(kCode)
		n.cmdStart = false
	case '#':
		if i == 0 || strings.IndexByte(" \t\n;&|()", src[i-1]) >= 0 {
			for i+1 < len(src) && src[i+1] != '\n' {
				i++
			}
		}
	case '<':
		if i+2 < len(src) && src[i+1] == '<' && src[i+2] != '<' {
			h, k := readHeredocWord(src[i+2:])
			if h.delim != "" {
				n.heredocs = append(n.heredocs, h)
			}
			i += 1 + k
		}
	case '\n':
		n.cmdStart = true
		return n.newline(i)
	case ';', '&', '|', '!':
		n.cmdStart = true
	case ' ', '\t':
	default:
		return n.word(i)
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
		if !h.quoted {
			// An unquoted body expands $(...) and ${...}: measured as
			// text in double quotes, on top of where it stands.
			if d, _ := nesting(`"` + body); len(n.stack)+d > MaxNesting {
				return i, true
			}
		}
		pos += k + 1
	}
	n.heredocs = n.heredocs[:0]
	return pos - 2, false // the loop's i++ lands on the last body's closing newline
}

// word reads a word where a command may start: a keyword opens or closes
// a frame.
func (n *nester) word(i int) (int, bool) {
	src, c := n.src, n.src[i]
	if !n.cmdStart || c < 'a' || c > 'z' {
		n.cmdStart = false
		return i, false
	}
	j := i
	for j < len(src) && src[j] >= 'a' && src[j] <= 'z' {
		j++
	}
	if j < len(src) && strings.IndexByte(" \t\n;&|()", src[j]) < 0 {
		n.cmdStart = false
		return i, false
	}
	// then, do, else, in...: a command may follow.
	n.cmdStart = true
	switch src[i:j] {
	case "if", "while", "until", "for", "select":
		if n.push(kWord) {
			return i, true
		}
	case "case":
		if n.push(kCase) {
			return i, true
		}
	case "fi", "done":
		n.pop(kWord)
	case "esac":
		n.pop(kCase)
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
