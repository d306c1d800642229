"""What every HTTP server of Tahrix Lab puts around its app: the guards (body limit, read
timeouts, sign-in throttle, security headers) and the bearer tokens file. Imports only the engine."""
