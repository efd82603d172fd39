// Package helm holds no code: its tests check the Helm chart in
// deploy/helm/waitroom with Helm's own packages (lint, render) and decode
// every rendered object strictly into the Kubernetes API types.
//
// It is a module of its own so that waitroom's module does not take in
// Helm's and Kubernetes' dependencies; ./scripts/test runs it.
package helm
