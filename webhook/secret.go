package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// SecretPrefix starts every signing secret (Standard Webhooks).
const SecretPrefix = "whsec_"

// Bounds of a secret's key, in bytes after base64.
const (
	MinSecretBytes = 24
	MaxSecretBytes = 64
)

// NewSecret returns a fresh whsec_ secret of 32 random bytes.
func NewSecret() string {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // never fails (crypto/rand)
	return SecretPrefix + base64.StdEncoding.EncodeToString(key)
}

// ParseSecret returns the key of a whsec_<base64> secret of 24 to 64 bytes.
func ParseSecret(s string) ([]byte, error) {
	rest, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return nil, errors.New("a webhook secret starts with whsec_")
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return nil, errors.New("a webhook secret is whsec_ and standard base64")
	}
	if len(key) < MinSecretBytes || len(key) > MaxSecretBytes {
		return nil, errors.New("a webhook secret's key is 24 to 64 bytes")
	}
	return key, nil
}

// Sign returns the webhook-signature header of a message: one
// "v1,<base64 HMAC-SHA256 of id.timestamp.body>" per key, space
// separated, so a receiver that knows any one of them accepts it (the
// overlap of a rotation).
func Sign(id string, at time.Time, body []byte, keys [][]byte) string {
	var b strings.Builder
	prefix := id + "." + strconv.FormatInt(at.Unix(), 10) + "."
	for i, key := range keys {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(prefix))
		h.Write(body)
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("v1,")
		b.WriteString(base64.StdEncoding.EncodeToString(h.Sum(nil)))
	}
	return b.String()
}
