// Package seal encrypts and authenticates short values under a key
// derived from an operator's secret: AES-256-GCM, a fresh random nonce per
// value, the result in unpadded base64url. One secret serves several
// purposes, each with a key of its own (the purpose names it), so a value
// sealed for one purpose never opens as another's.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
)

// ErrInvalid is any value Open cannot open: forged, altered, truncated,
// sealed under another secret, purpose or binding.
var ErrInvalid = errors.New("seal: not a value sealed under this key")

// Sealer seals values for one purpose.
type Sealer struct{ aead cipher.AEAD }

// New returns the sealer of purpose under secret. The key is
// HMAC-SHA256(secret, purpose): every instance given the same secret
// opens the others' values.
func New(secret []byte, purpose string) Sealer {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(purpose))
	block, _ := aes.NewCipher(mac.Sum(nil)) // a 32-byte key never fails
	aead, _ := cipher.NewGCM(block)         // nor does the standard nonce size
	return Sealer{aead}
}

// Seal returns plain encrypted and authenticated, bound to binding (which
// Open must be given again; nil binds to nothing).
func (s Sealer) Seal(plain, binding []byte) string {
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	_, _ = rand.Read(nonce) // crypto/rand never fails
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, binding))
}

// Open returns what Seal sealed with the same binding, or ErrInvalid.
func (s Sealer) Open(sealed string, binding []byte) ([]byte, error) {
	raw, err := base64.RawURLEncoding.Strict().DecodeString(sealed) // one spelling per value
	if err != nil || len(raw) < s.aead.NonceSize()+s.aead.Overhead() {
		return nil, ErrInvalid
	}
	nonce, box := raw[:s.aead.NonceSize()], raw[s.aead.NonceSize():]
	plain, err := s.aead.Open(nil, nonce, box, binding)
	if err != nil {
		return nil, ErrInvalid
	}
	return plain, nil
}
