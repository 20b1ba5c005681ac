package ratelimit

// newMemoryStore gives tests in package ratelimit_test the default store.
var NewMemoryStoreForTest = func() Store { return newDefaultStore(SystemClock) }
