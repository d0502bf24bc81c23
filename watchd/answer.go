package watchd

import (
	"encoding/json"
	"errors"
	"mime"
	"net/http"

	"github.com/sirupsen/logrus"
	"github.com/vmspool/vmspool/spool"
)

// AnswerRequest is the body of POST /chats/C/answer (application/json):
// the question answered, as the page showed it (empty: whichever is
// open), and the answer.
type AnswerRequest struct {
	Question string  `json:"question"`
	Answer   *string `json:"answer"`
}

// maxAnswerBody bounds the body of an answer: an answer is at most
// spool.MaxEventText, which JSON may write six bytes a byte.
const maxAnswerBody = 64 << 10

// serveAnswer answers the chat's open question: the same document and the
// same rules as `spool answer` (spool.AnswerQuestion), so the first answer
// wins wherever it came from, and the chat's watchers see it at spoold's
// next flush, as any answer. 200 with the answer written; 409 when no
// question is open, another is, or it was answered already; 400 for what
// does not answer it; 403 from a browser on another origin, and when
// answering is off.
//
// Who may answer is who may read the chats here (Auth over TCP, the
// socket's mode). A browser's request must come from the page itself on
// either listener: over TCP the token is a header, which no page of
// another origin can make a browser send, and here a
// request that carries an Origin or a Sec-Fetch-Site (a browser's, say
// through a proxy to the socket) must name this server too. The body must
// be application/json, which no cross-site form can send without a CORS
// preflight that watchd never answers.
func (s *Server) serveAnswer(w http.ResponseWriter, r *http.Request) {
	if s.cfg.NoAnswer {
		httpError(w, http.StatusForbidden, "watchd: answering is off here (watchd serve --no-answer): answer with spool answer on the host")
		return
	}
	if !BrowserSameOrigin(r) {
		httpError(w, http.StatusForbidden, "watchd: %s from another origin refused", r.Method)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		httpError(w, http.StatusUnsupportedMediaType, "watchd: an answer is sent as application/json: {\"question\": \"Q\", \"answer\": \"TEXT\"}")
		return
	}
	chat := chatOf(w, r)
	if chat == "" {
		return
	}
	var req AnswerRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxAnswerBody))
	if err := dec.Decode(&req); err != nil || req.Answer == nil {
		httpError(w, http.StatusBadRequest, "watchd: the body is not an answer: want {\"question\": \"Q\", \"answer\": \"TEXT\"}")
		return
	}
	a, err := s.cfg.Spool.AnswerQuestion(chat, req.Question, *req.Answer)
	log := s.log.WithFields(logrus.Fields{"chat": chat, "question": req.Question, "remote": r.RemoteAddr})
	switch {
	case errors.Is(err, spool.ErrNoQuestion), errors.Is(err, spool.ErrAnswered):
		httpError(w, http.StatusConflict, "watchd: %v", err)
	case errors.Is(err, spool.ErrBadAnswer), errors.Is(err, spool.ErrInvalidID):
		httpError(w, http.StatusBadRequest, "watchd: %v", err)
	case err != nil:
		log.WithError(err).Warn("answer not written")
		httpError(w, http.StatusInternalServerError, "watchd: %v", err)
	default:
		log.WithField("job", a.Job).Info("question answered over HTTP")
		writeJSON(w, a)
	}
}
