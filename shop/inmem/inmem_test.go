package inmem_test

import (
	"testing"

	"github.com/waitroom/waitroom/shop/inmem"
	"github.com/waitroom/waitroom/shop/shoptest"
)

func TestStore(t *testing.T) {
	t.Parallel()
	shoptest.Run(t, func(*testing.T) shoptest.Store { return inmem.New() })
}
