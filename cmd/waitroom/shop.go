package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/waitroom/waitroom/shop"
)

// parseProducts reads "id:stock,id:stock".
func parseProducts(v rawValue) ([]shop.Product, error) {
	var out []shop.Product
	seen := map[string]bool{}
	for _, item := range splitList(v.text) {
		id, stockText, ok := strings.Cut(item, ":")
		if !ok {
			return nil, v.fail(fmt.Sprintf("%q: want id:stock", item))
		}
		stock, err := strconv.ParseInt(strings.TrimSpace(stockText), 10, 64)
		if err != nil || stock < 0 || stock > shop.MaxStock {
			return nil, v.fail(fmt.Sprintf("%q: stock must be a whole number in [0, %d]", item, shop.MaxStock))
		}
		p := shop.Product{ID: strings.TrimSpace(id), Name: strings.TrimSpace(id), Stock: stock}
		if err := p.Validate(); err != nil {
			return nil, v.fail(fmt.Sprintf("%q: %v", item, err))
		}
		if seen[p.ID] {
			return nil, v.fail(fmt.Sprintf("product %q given twice", p.ID))
		}
		seen[p.ID] = true
		out = append(out, p)
	}
	return out, nil
}
