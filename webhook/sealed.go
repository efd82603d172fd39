package webhook

import (
	"strings"

	"github.com/waitroom/waitroom/internal/seal"
)

// sealedPrefix marks a stored secret sealed by a SecretSealer; the
// whsec_ secrets themselves never start with it.
const sealedPrefix = "whsealed1:"

// SecretSealer seals the endpoints' signing secrets at rest under a key
// derived from an operator's secret (serve's --cookie-secret, shared by
// every instance), each bound to its endpoint's id, so a sealed secret
// copied to another endpoint does not open.
type SecretSealer struct{ s seal.Sealer }

// NewSecretSealer returns the sealer of secret.
func NewSecretSealer(secret []byte) *SecretSealer {
	return &SecretSealer{seal.New(secret, "waitroom webhook secret v1")}
}

// sealAll returns e with its secrets sealed; a nil sealer keeps them.
func (z *SecretSealer) sealAll(e Endpoint) Endpoint {
	if z == nil {
		return e
	}
	sealed := make([]Secret, len(e.Secrets))
	for i, s := range e.Secrets {
		sealed[i] = s
		if !strings.HasPrefix(s.Value, sealedPrefix) {
			sealed[i].Value = sealedPrefix + z.s.Seal([]byte(s.Value), []byte(e.ID))
		}
	}
	e.Secrets = sealed
	return e
}

// openAll returns e with its sealed secrets opened. One that does not
// open (sealed under another key: the cookie secret changed) stays as
// stored, which no key parses from, so it signs nothing: the endpoint
// gets no message until its secret is rotated (Admin), never an unsigned
// one. A secret stored before sealing was on is read as it is.
func (z *SecretSealer) openAll(e Endpoint) Endpoint {
	for i, s := range e.Secrets {
		rest, ok := strings.CutPrefix(s.Value, sealedPrefix)
		if !ok || z == nil {
			continue
		}
		if plain, err := z.s.Open(rest, []byte(e.ID)); err == nil {
			e.Secrets[i].Value = string(plain)
		}
	}
	return e
}
