import Foundation
import Testing
@testable import PinproxySpotify

@Suite("spotify login: the authorize request")
struct AuthorizationRequestTests {
    @Test func theS256ChallengeMatchesRFC7636AppendixB() {
        #expect(AuthorizationRequest.s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk") == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
    }

    @Test func theURLCarriesEveryParameterEscaped() {
        let request = AuthorizationRequest(verifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk", state: "st-1")
        let url = request.url(accounts: "https://accounts.example/", clientID: "id", redirectURI: "http://127.0.0.1:8765/callback",
                              scope: "user-read-private user-read-email")
        #expect(url == "https://accounts.example/authorize?response_type=code&client_id=id"
            + "&redirect_uri=http%3A%2F%2F127.0.0.1%3A8765%2Fcallback&code_challenge_method=S256"
            + "&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&state=st-1&scope=user-read-private%20user-read-email")
    }

    /// Any provider's `authorize_url`: a query written there is kept, and no scope means no `scope` parameter.
    @Test func anyProvidersAuthorizeURLKeepsItsQuery() {
        let request = AuthorizationRequest(verifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk", state: "st-1")
        let url = request.url(authorize: "https://idp.example/oauth/authorize?audience=api", clientID: "id",
                              redirectURI: "http://127.0.0.1:8765/cb", scope: nil)
        #expect(url == "https://idp.example/oauth/authorize?audience=api&response_type=code&client_id=id"
            + "&redirect_uri=http%3A%2F%2F127.0.0.1%3A8765%2Fcb&code_challenge_method=S256"
            + "&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&state=st-1")
    }

    @Test func verifiersAndStatesAreFreshEachTime() {
        let a = AuthorizationRequest(), b = AuthorizationRequest()
        #expect(a.verifier != b.verifier && a.state != b.state)
        #expect(a.verifier.count >= 43, "RFC 7636: 43 to 128 characters")
    }
}
