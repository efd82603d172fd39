package shop

import (
	"errors"
	"fmt"
	"net/http"
	"unicode/utf8"
)

// Sentinel errors. Stores wrap them with %w; the HTTP handlers map them to a
// status and a code with errorTable.
var (
	ErrBadRequest          = errors.New("bad request")
	ErrProductNotFound     = errors.New("product not found")
	ErrProductExists       = errors.New("product already exists")
	ErrSoldOut             = errors.New("sold out")
	ErrQuantityOverLimit   = errors.New("quantity over limit")
	ErrCouponNotFound      = errors.New("coupon not found")
	ErrCouponNotOwned      = errors.New("coupon belongs to another user")
	ErrCouponUsed          = errors.New("coupon already used")
	ErrCouponExists        = errors.New("coupon already exists")
	ErrOrderNotFound       = errors.New("order not found")
	ErrIdempotencyConflict = errors.New("idempotency key used by another user")
)

// errorTable maps each sentinel to its answer. COUPON_NOT_OWNED is 422 like
// COUPON_NOT_FOUND, not 403: the request is well formed and authenticated,
// it names a coupon this user cannot use, and the answer must not tell
// whether someone else holds it. COUPON_USED and SOLD_OUT are 409: the
// state changed under the user (another order won). QUANTITY_OVER_LIMIT
// is 422: the order asks for more units than the user's turn reserved
// (UnitsHeader), and asking again with the same token and fewer works.
var errorTable = []struct {
	err     error
	status  int
	code    string
	message string
}{
	{ErrBadRequest, http.StatusBadRequest, "BAD_REQUEST", ""}, // message from the error itself
	{ErrProductNotFound, http.StatusNotFound, "PRODUCT_NOT_FOUND", "no such product"},
	{ErrProductExists, http.StatusConflict, "PRODUCT_EXISTS", "a product with this id already exists"},
	{ErrSoldOut, http.StatusConflict, "SOLD_OUT", "not enough stock left"},
	{ErrQuantityOverLimit, http.StatusUnprocessableEntity, "QUANTITY_OVER_LIMIT", ""}, // message from the error itself
	{ErrCouponNotFound, http.StatusUnprocessableEntity, "COUPON_NOT_FOUND", "no such coupon"},
	{ErrCouponNotOwned, http.StatusUnprocessableEntity, "COUPON_NOT_OWNED", "this coupon is not yours"},
	{ErrCouponUsed, http.StatusConflict, "COUPON_USED", "this coupon was already used"},
	{ErrCouponExists, http.StatusConflict, "COUPON_EXISTS", "a coupon with this id already exists"},
	{ErrOrderNotFound, http.StatusNotFound, "ORDER_NOT_FOUND", "no such order"},
	{ErrIdempotencyConflict, http.StatusConflict, "IDEMPOTENCY_KEY_CONFLICT", "this idempotency key was used by another user"},
}

// badRequest wraps ErrBadRequest with a message safe for clients.
func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadRequest, fmt.Sprintf(format, args...))
}

// Validate reports whether req is acceptable; the error wraps ErrBadRequest.
func (req PlaceOrder) Validate() error {
	if err := checkUser("user", req.User); err != nil {
		return err
	}
	if err := checkKey(req.IdempotencyKey); err != nil {
		return err
	}
	if err := checkID("product_id", req.ProductID); err != nil {
		return err
	}
	if req.Quantity < 1 || req.Quantity > MaxQuantity {
		return badRequest("quantity must be between 1 and %d", MaxQuantity)
	}
	if req.CouponID != "" {
		if err := checkID("coupon_id", req.CouponID); err != nil {
			return err
		}
	}
	return nil
}

// Validate reports whether p can be created; the error wraps ErrBadRequest.
func (p Product) Validate() error {
	if err := checkID("id", p.ID); err != nil {
		return err
	}
	if p.Name == "" || len(p.Name) > MaxNameLen || !utf8.ValidString(p.Name) {
		return badRequest("name must be valid UTF-8 of 1 to %d bytes", MaxNameLen)
	}
	for _, r := range p.Name {
		if r < 0x20 || r == 0x7f {
			return badRequest("name must not contain control characters")
		}
	}
	if p.Stock < 0 || p.Stock > MaxStock {
		return badRequest("stock must be between 0 and %d", MaxStock)
	}
	return nil
}

// Validate reports whether c can be created; the error wraps ErrBadRequest.
func (c Coupon) Validate() error {
	if err := checkID("id", c.ID); err != nil {
		return err
	}
	if err := checkUser("owner", c.Owner); err != nil {
		return err
	}
	if c.DiscountPercent < 1 || c.DiscountPercent > MaxDiscount {
		return badRequest("discount must be a percentage between 1 and %d", MaxDiscount)
	}
	return nil
}

// CheckID reports whether id is a valid product, coupon or order id:
// 1 to MaxIDLen of A-Z a-z 0-9 . _ -, safe in URLs and logs.
func CheckID(id string) error {
	return checkID("id", id)
}

// CheckUser reports whether user is a valid user id: 1 to MaxUserLen
// printable ASCII characters without spaces (emails and UUIDs fit).
func CheckUser(user string) error {
	return checkUser("user", user)
}

func checkID(field, id string) error {
	if id == "" || len(id) > MaxIDLen {
		return badRequest("%s must be 1 to %d characters", field, MaxIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return badRequest("%s may hold only A-Z a-z 0-9 . _ -", field)
		}
	}
	return nil
}

func checkUser(field, user string) error {
	if user == "" || len(user) > MaxUserLen || !visibleASCII(user) {
		return badRequest("%s must be 1 to %d printable ASCII characters without spaces", field, MaxUserLen)
	}
	return nil
}

func checkKey(key string) error {
	if key == "" || len(key) > MaxKeyLen || !visibleASCII(key) {
		return badRequest("idempotency key must be 1 to %d printable ASCII characters without spaces", MaxKeyLen)
	}
	return nil
}

func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
