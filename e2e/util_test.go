package e2e

import "strconv"

func strconvItoa(n int) string { return strconv.Itoa(n) }
