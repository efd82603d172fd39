// Package deploy holds no code: its tests check the artefacts that ship
// waitroom — the root Dockerfile's image and the compose stack in
// deploy/compose — with the tools that consume them (podman, the compose
// specification's loader).
package deploy
