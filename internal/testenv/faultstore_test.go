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
		err, _ := out[len(out)-1].Interface().(error)
		require.ErrorIs(t, err, refused, m.Name)
		require.Equal(t, m.Name, asked[len(asked)-1])
	}
}
