package testenv_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
)

// Every method of waitroom.Store asks the fault first: one the FaultStore
// did not hook would reach the nil Store below and panic, so a method
// added to the interface and not to FaultStore fails here.
func TestFaultStoreHooksEveryMethod(t *testing.T) {
	t.Parallel()
	refused := errors.New("refused")
	var asked []string
	s := &testenv.FaultStore{}
	s.SetFault(func(_ context.Context, method string) error {
		asked = append(asked, method)
		return refused
	})
	store := reflect.ValueOf(waitroom.Store(s))
	iface := reflect.TypeOf((*waitroom.Store)(nil)).Elem()
	for i := range iface.NumMethod() {
		m := iface.Method(i)
		args := []reflect.Value{reflect.ValueOf(t.Context())}
		for j := 1; j < m.Type.NumIn(); j++ {
			args = append(args, reflect.Zero(m.Type.In(j)))
		}
		var out []reflect.Value
		require.NotPanics(t, func() { out = store.MethodByName(m.Name).Call(args) }, m.Name)
		require.Equal(t, m.Name, asked[len(asked)-1])
		if m.Type.Out(m.Type.NumOut()-1) != reflect.TypeFor[error]() {
			continue // Wakes: no error to answer with (its own test is below)
		}
		err, _ := out[len(out)-1].Interface().(error)
		require.ErrorIs(t, err, refused, m.Name)
	}
}

// A refused Wakes delivers nothing and ends with its context.
func TestFaultStoreRefusedWakes(t *testing.T) {
	t.Parallel()
	s := &testenv.FaultStore{}
	s.SetFault(func(context.Context, string) error { return errors.New("refused") })
	ctx, cancel := context.WithCancel(t.Context())
	wakes := s.Wakes(ctx)
	select {
	case room := <-wakes:
		t.Fatalf("a wake, %q, from a refused subscription", room)
	default:
	}
	cancel()
	_, open := <-wakes
	require.False(t, open)
}
