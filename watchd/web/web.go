// Package web holds watchd serve's live page: plain HTML, CSS and a little
// JavaScript, embedded in the binary so that the page needs no build step
// and no file beside the daemon. The page reads only what watchd serves
// (GET /chats, GET /chats/C, GET /chats/C/events), and writes one thing:
// a person's answer to a run's question (POST /chats/C/answer).
package web

import "embed"

// FS holds index.html, style.css and app.js.
//
//go:embed *.html *.css *.js
var FS embed.FS

// CSP is the Content-Security-Policy the page needs: its own files and
// its own origin, nothing inline, nothing from elsewhere.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
