//go:build tools

// This file pins the example programs' framework dependencies while the
// examples are being written; it is removed once every example imports them.
package examples

import (
	_ "github.com/gin-gonic/gin"
	_ "github.com/go-chi/chi/v5"
	_ "github.com/labstack/echo/v4"
	_ "github.com/redis/go-redis/v9"
)
