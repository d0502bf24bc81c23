package spool

import (
	"encoding/json"
	"fmt"
)

// Names inside chats/<chat>/.
const (
	AnswerFile = "answer.json"
	// LockFile is flocked by the daemon that runs the chat's current job;
	// it is never read and holds nothing.
	LockFile = "lock"
)

// Answer is chats/<chat>/answer.json: the person's answer to a question.
// It is taken only by the run that asked that question id.
type Answer struct {
	Job      string  `json:"job"`
	Question string  `json:"question"`
	Answer   string  `json:"answer"`
	At       float64 `json:"at"`
}

// WriteAnswer writes chats/<chat>/answer.json atomically and durably (a
// person's answer must not vanish in a crash).
func (s *Spool) WriteAnswer(chat string, a *Answer) error {
	if err := CheckChatID(chat); err != nil {
		return err
	}
	if a.At == 0 {
		a.At = Now()
	}
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	if err := s.mkdir(ChatsDir); err != nil {
		return chatError(chat, "", s.plain(ChatsDir, true, err))
	}
	dir, err := s.subRoot(ChatsDir+"/"+chat, true)
	if err != nil {
		return chatError(chat, "answer", s.plain(ChatsDir+"/"+chat, true, err))
	}
	defer dir.Close()
	if err := writeFile(dir, AnswerFile, append(b, '\n')); err != nil {
		return fmt.Errorf("chat %s: answer: %w", chat, err)
	}
	return nil
}

// ReadAnswer reads chats/<chat>/answer.json.
func (s *Spool) ReadAnswer(chat string) (*Answer, error) {
	if err := CheckChatID(chat); err != nil {
		return nil, err
	}
	name := ChatsDir + "/" + chat + "/" + AnswerFile
	b, _, err := readFile(s.root, name, MaxDocument)
	if err != nil {
		return nil, chatError(chat, "answer", s.plain(name, false, err))
	}
	var a Answer
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("chat %s: answer %s: %w: %v", chat, s.Path(name), ErrCorrupt, err)
	}
	return &a, nil
}

// ChatDir returns the name of chats/<chat> in the tree.
func ChatDir(chat string) string { return ChatsDir + "/" + chat }
