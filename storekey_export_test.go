package ratelimit

// CompactKey gives tests in package ratelimit_test the store-key mapping.
var CompactKey = compactKey
