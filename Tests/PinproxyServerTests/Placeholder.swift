// Replaced by the server module's unit tests.
