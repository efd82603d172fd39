package seal_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/waitroom/waitroom/internal/seal"
)

// A value opens only with its secret, purpose and binding, and in the
// one spelling Seal gave it.
func TestOpenTakesOnlyWhatSealMade(t *testing.T) {
	secret := []byte(strings.Repeat("s", 32))
	s := seal.New(secret, "purpose a")
	sealed := s.Seal([]byte("value"), []byte("bound"))
	if got, err := seal.New(secret, "purpose a").Open(sealed, []byte("bound")); err != nil || string(got) != "value" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if again := s.Seal([]byte("value"), []byte("bound")); again == sealed {
		t.Fatal("two seals of one value are alike: the nonce is not fresh")
	}
	for name, open := range map[string]func() ([]byte, error){
		"another secret": func() ([]byte, error) {
			return seal.New([]byte(strings.Repeat("t", 32)), "purpose a").Open(sealed, []byte("bound"))
		},
		"another purpose": func() ([]byte, error) { return seal.New(secret, "purpose b").Open(sealed, []byte("bound")) },
		"another binding": func() ([]byte, error) { return s.Open(sealed, []byte("other")) },
		"no binding":      func() ([]byte, error) { return s.Open(sealed, nil) },
		"altered":         func() ([]byte, error) { return s.Open(sealed[:10]+flip(sealed[10])+sealed[11:], []byte("bound")) },
		"truncated":       func() ([]byte, error) { return s.Open(sealed[:20], []byte("bound")) },
		"padded spelling": func() ([]byte, error) { return s.Open(sealed+"=", []byte("bound")) },
		"empty":           func() ([]byte, error) { return s.Open("", []byte("bound")) },
	} {
		if got, err := open(); !errors.Is(err, seal.ErrInvalid) || got != nil {
			t.Errorf("%s: %q, %v; want ErrInvalid", name, got, err)
		}
	}
}

func flip(c byte) string {
	if c == 'A' {
		return "B"
	}
	return "A"
}
