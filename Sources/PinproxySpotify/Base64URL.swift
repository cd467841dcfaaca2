import PinproxyTLS

/// The TLS module's base64url under this module's own name, so this
/// module's tests, which import only `PinproxySpotify`, can take sealed
/// tokens apart. Not a second implementation.
typealias Base64URL = PinproxyTLS.Base64URL
