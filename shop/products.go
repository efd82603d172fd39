package shop

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseProducts reads a product list written "id:stock,id:stock", each
// product named after its id. The error says which item is wrong and why.
func ParseProducts(text string) ([]Product, error) {
	var out []Product
	seen := map[string]bool{}
	for _, item := range strings.Split(text, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		id, stockText, ok := strings.Cut(item, ":")
		if !ok {
			return nil, fmt.Errorf("%q: want id:stock", item)
		}
		stock, err := strconv.ParseInt(strings.TrimSpace(stockText), 10, 64)
		if err != nil || stock < 0 || stock > MaxStock {
			return nil, fmt.Errorf("%q: stock must be a whole number in [0, %d]", item, MaxStock)
		}
		p := Product{ID: strings.TrimSpace(id), Name: strings.TrimSpace(id), Stock: stock}
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("%q: %v", item, err)
		}
		if seen[p.ID] {
			return nil, fmt.Errorf("product %q given twice", p.ID)
		}
		seen[p.ID] = true
		out = append(out, p)
	}
	return out, nil
}
