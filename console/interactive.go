package console

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/chzyer/readline"
)

// Prompt is the interactive console's prompt.
const Prompt = "roce-fwd> "

// Session is what an interactive console talks to: a local shell or a
// daemon's socket.
type Session interface {
	Exec(line string, jsonOut bool) (string, error)
	Complete(line string) []string
}

// completer adapts Session.Complete to readline: it returns, for each
// candidate, what to append to the word under the cursor.
type completer struct{ s Session }

func (c completer) Do(line []rune, pos int) ([][]rune, int) {
	head := string(line[:pos])
	word := head[strings.LastIndexAny(head, " \t")+1:]
	var out [][]rune
	for _, cand := range c.s.Complete(head) {
		if strings.HasPrefix(cand, word) {
			out = append(out, []rune(cand[len(word):]+" "))
		}
	}
	return out, len([]rune(word))
}

// ExpandHome turns a leading "~/" into the user's home directory.
func ExpandHome(path string) string {
	if rest, ok := strings.CutPrefix(path, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	return path
}

// Interactive reads command lines from in with line editing, history
// (persisted in historyFile unless "") and Tab completion, runs them on
// s and prints the results, until quit, exit or end of input. Errors of
// commands are printed; only a broken terminal or connection ends it
// with an error.
func Interactive(s Session, in io.ReadCloser, out io.Writer, historyFile string) error {
	rl, err := readline.NewEx(&readline.Config{
		Prompt:          Prompt,
		HistoryFile:     ExpandHome(historyFile),
		AutoComplete:    completer{s},
		InterruptPrompt: "^C",
		EOFPrompt:       "quit",
		Stdin:           in,
		Stdout:          out,
		Stderr:          out,
	})
	if err != nil {
		return err
	}
	defer rl.Close()
	for {
		line, err := rl.Readline()
		switch {
		case errors.Is(err, readline.ErrInterrupt):
			continue // ^C abandons the line, like a shell
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		res, err := s.Exec(line, false)
		io.WriteString(rl.Stdout(), res)
		if errors.Is(err, ErrQuit) {
			return nil
		}
		if errors.Is(err, ErrDisconnected) {
			return err
		}
		if err != nil {
			fmt.Fprintln(rl.Stdout(), err)
		}
	}
}
