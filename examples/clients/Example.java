// Run by java.sh, which makes the trust store and sets the proxy properties.
import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;

public class Example {
    public static void main(String[] args) throws Exception {
        String url = System.getenv().getOrDefault("API_URL", "https://api.spotify.com/v1/markets");
        // HttpClient's default ProxySelector honours -Dhttps.proxyHost/-Dhttps.proxyPort,
        // and its default SSLContext the -Djavax.net.ssl.trustStore given by java.sh.
        HttpClient client = HttpClient.newBuilder()
                .proxy(java.net.ProxySelector.getDefault())
                .connectTimeout(Duration.ofSeconds(10))
                .build();
        HttpRequest request = HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(30)).GET().build();
        HttpResponse<String> response = client.send(request, HttpResponse.BodyHandlers.ofString());
        System.out.println(response.body());
        String reason = response.headers().firstValue("x-pinproxy-error").orElse(null);
        System.err.println("HTTP " + response.statusCode() + (reason != null ? " (pinproxy: " + reason + ")" : ""));
    }
}
