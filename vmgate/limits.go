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
	const (
		code  = 'c' // a command list: (, $(, {, ${, [, a case
		dq    = '"' // inside double quotes
		bq    = '`' // inside backquotes (code)
		kcase = 'k' // inside case ... esac: a lone ")" closes a pattern, not a frame
		kword = 'w' // inside if/while/until/for/select ... fi/done
	)
	stack := make([]byte, 0, 32)
	maxd := 0
	var heredocs []heredoc
	cmdStart := true // the next word may be a command (and so a keyword)
	top := func() byte {
		if len(stack) == 0 {
			return code
		}
		return stack[len(stack)-1]
	}
	push := func(k byte, i int) bool {
		stack = append(stack, k)
		if len(stack) > maxd {
			maxd = len(stack)
		}
		return len(stack) > MaxNesting
	}
	pop := func(k byte) {
		if len(stack) > 0 && stack[len(stack)-1] == k {
			stack = stack[:len(stack)-1]
		}
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		t := top()
		if t == dq {
			switch c {
			case '\\':
				i++
			case '"':
				pop(dq)
			case '`':
				if push(bq, i) {
					return MaxNesting + 1, i
				}
			case '$':
				if i+1 < len(src) && (src[i+1] == '(' || src[i+1] == '{') {
					i++
					if push(code, i) {
						return MaxNesting + 1, i
					}
					cmdStart = true
				}
			}
			continue
		}
		switch c {
		case '\\':
			i++
			cmdStart = false
		case '\'':
			// $'...' takes backslash escapes; '...' takes none.
			ansi := i > 0 && src[i-1] == '$'
			for i++; i < len(src) && src[i] != '\''; i++ {
				if ansi && src[i] == '\\' {
					i++
				}
			}
			cmdStart = false
		case '"':
			if push(dq, i) {
				return MaxNesting + 1, i
			}
			cmdStart = false
		case '`':
			if t == bq {
				pop(bq)
			} else if push(bq, i) {
				return MaxNesting + 1, i
			}
			cmdStart = true
		case '(', '{', '[':
			if push(code, i) {
				return MaxNesting + 1, i
			}
			cmdStart = true
		case ')':
			if t == kcase {
				break // a pattern's end: case a) ...
			}
			pop(code)
			cmdStart = false
		case '}', ']':
			pop(code)
			cmdStart = false
		case '#':
			if i == 0 || strings.IndexByte(" \t\n;&|()", src[i-1]) >= 0 {
				for i+1 < len(src) && src[i+1] != '\n' {
					i++
				}
			}
		case '<':
			if i+2 < len(src) && src[i+1] == '<' && src[i+2] != '<' {
				h, n := readHeredocWord(src[i+2:])
				if h.delim != "" {
					heredocs = append(heredocs, h)
				}
				i += 1 + n
			}
		case '\n':
			cmdStart = true
			if len(heredocs) == 0 {
				break
			}
			// The bodies follow this line, one after the other.
			pos := i + 1
			for _, h := range heredocs {
				body, n := heredocBody(src[min(pos, len(src)):], h)
				if !h.quoted {
					// An unquoted body expands $(...) and ${...}: measured
					// as text in double quotes, on top of where it stands.
					if d, _ := nesting(`"` + body); len(stack)+d > MaxNesting {
						return MaxNesting + 1, i
					}
				}
				pos += n + 1
			}
			heredocs = heredocs[:0]
			i = pos - 2 // the loop's i++ lands on the last body's closing newline
		case ';', '&', '|', '!':
			cmdStart = true
		case ' ', '\t':
		default:
			if cmdStart && c >= 'a' && c <= 'z' {
				j := i
				for j < len(src) && src[j] >= 'a' && src[j] <= 'z' {
					j++
				}
				if j == len(src) || strings.IndexByte(" \t\n;&|()", src[j]) >= 0 {
					switch src[i:j] {
					case "if", "while", "until", "for", "select":
						if push(kword, i) {
							return MaxNesting + 1, i
						}
					case "case":
						if push(kcase, i) {
							return MaxNesting + 1, i
						}
					case "fi", "done":
						pop(kword)
					case "esac":
						pop(kcase)
					}
					// then, do, else, in...: a command may follow.
					cmdStart = true
					i = j - 1
					continue
				}
			}
			cmdStart = false
		}
	}
	return maxd, 0
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
