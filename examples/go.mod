module github.com/sluicehq/ratelimit/examples

go 1.25.0

require (
	github.com/gin-gonic/gin v1.12.0
	github.com/go-chi/chi/v5 v5.5.0
	github.com/labstack/echo/v4 v4.16.0
	github.com/prometheus/client_golang v1.24.1
	github.com/sluicehq/ratelimit v0.1.0
	github.com/sluicehq/ratelimit/adapters/chi v0.1.0
	github.com/sluicehq/ratelimit/adapters/echo v0.1.0
	github.com/sluicehq/ratelimit/adapters/gin v0.1.0
	github.com/sluicehq/ratelimit/metrics/prometheus v0.1.0
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/bytedance/gopkg v0.1.3 // indirect
	github.com/bytedance/sonic v1.15.0 // indirect
	github.com/bytedance/sonic/loader v0.5.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/cloudwego/base64x v0.1.6 // indirect
	github.com/gabriel-vasile/mimetype v1.4.12 // indirect
	github.com/gin-contrib/sse v1.1.0 // indirect
	github.com/go-playground/locales v0.14.1 // indirect
	github.com/go-playground/universal-translator v0.18.1 // indirect
	github.com/go-playground/validator/v10 v10.30.1 // indirect
	github.com/goccy/go-json v0.10.5 // indirect
	github.com/goccy/go-yaml v1.19.2 // indirect
	github.com/json-iterator/go v1.1.12 // indirect
	github.com/klauspost/cpuid/v2 v2.4.0 // indirect
	github.com/labstack/gommon v0.5.0 // indirect
	github.com/leodido/go-urn v1.4.0 // indirect
	github.com/mattn/go-colorable v0.1.15 // indirect
	github.com/mattn/go-isatty v0.0.22 // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/modern-go/reflect2 v1.0.2 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/pelletier/go-toml/v2 v2.2.4 // indirect
	github.com/prometheus/client_model v0.6.2 // indirect
	github.com/prometheus/common v0.70.1 // indirect
	github.com/prometheus/procfs v0.21.1 // indirect
	github.com/quic-go/qpack v0.6.0 // indirect
	github.com/quic-go/quic-go v0.59.0 // indirect
	github.com/redis/go-redis/v9 v9.22.0
	github.com/sluicehq/ratelimit/stores/redis v0.1.0
	github.com/twitchyliquid64/golang-asm v0.15.1 // indirect
	github.com/ugorji/go/codec v1.3.1 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	github.com/valyala/fasttemplate v1.2.2 // indirect
	go.mongodb.org/mongo-driver/v2 v2.5.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/arch v0.22.0 // indirect
	golang.org/x/crypto v0.55.0 // indirect
	golang.org/x/net v0.58.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/text v0.41.0 // indirect
	golang.org/x/time v0.15.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace (
	github.com/sluicehq/ratelimit => ..
	github.com/sluicehq/ratelimit/adapters/chi => ../adapters/chi
	github.com/sluicehq/ratelimit/adapters/echo => ../adapters/echo
	github.com/sluicehq/ratelimit/adapters/gin => ../adapters/gin
	github.com/sluicehq/ratelimit/metrics/prometheus => ../metrics/prometheus
)

replace github.com/sluicehq/ratelimit/stores/redis => ../stores/redis

require github.com/sluicehq/ratelimit/client v0.1.0

replace github.com/sluicehq/ratelimit/client => ../client

require github.com/sluicehq/ratelimit/config v0.1.0

require go.yaml.in/yaml/v3 v3.0.5 // indirect

replace github.com/sluicehq/ratelimit/config => ../config
