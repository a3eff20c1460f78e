package example.backend;

import io.jsonwebtoken.Jwts;
import io.jsonwebtoken.security.Keys;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.time.Instant;
import java.util.Date;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import javax.crypto.Mac;
import javax.crypto.SecretKey;
import javax.crypto.spec.SecretKeySpec;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;

/**
 * What a Spring STOMP app keeps when rtlab carries its clients: the @MessageMapping handlers
 * (as one endpoint rtlab POSTs each SEND to), token minting (rtlab verifies HS256 JWTs with the
 * shared secret) and convertAndSendToUser (a call of rtlab's server API).
 */
@SpringBootApplication
@RestController
public class Backend {
    private final ObjectMapper json = new ObjectMapper();
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    private final SecretKey key;
    private final String rtlab;
    private final String apiKey;
    private final String appSecret;

    public Backend(@Value("${rtlab.secret}") String secret, @Value("${rtlab.url}") String rtlab,
                   @Value("${rtlab.api-key}") String apiKey, @Value("${rtlab.app-secret:}") String appSecret) {
        this.key = Keys.hmacShaKeyFor(secret.getBytes(StandardCharsets.UTF_8));
        this.rtlab = rtlab;
        this.apiKey = apiKey;
        this.appSecret = appSecret;
    }

    public static void main(String[] args) {
        SpringApplication.run(Backend.class, args);
    }

    /**
     * The @MessageMapping handlers: rtlab POSTs each SEND under /app here (--app-proxy), signed
     * with --app-proxy-secret: X-Rtlab-Signature is "sha256=" + hex HMAC-SHA256 of
     * X-Rtlab-Timestamp + "." + body. Anything else is not rtlab and is refused.
     */
    @PostMapping("/rtlab/app")
    public ResponseEntity<Map<String, Object>> onSend(@RequestBody String raw,
            @RequestHeader(value = "X-Rtlab-Timestamp", required = false) String ts,
            @RequestHeader(value = "X-Rtlab-Signature", required = false) String sig) throws Exception {
        if (!appSecret.isEmpty() && !signedByRtlab(raw, ts, sig)) {
            return ResponseEntity.status(401).body(Map.of("error", Map.of("reason", "not signed by rtlab")));
        }
        @SuppressWarnings("unchecked")
        Map<String, Object> send = json.readValue(raw, Map.class);
        return ResponseEntity.ok(handle(send));
    }

    private boolean signedByRtlab(String body, String ts, String sig) throws Exception {
        if (ts == null || sig == null || Math.abs(Instant.now().getEpochSecond() - Long.parseLong(ts)) > 300) {
            return false; // unsigned, or replayed after five minutes
        }
        Mac mac = Mac.getInstance("HmacSHA256");
        mac.init(new SecretKeySpec(appSecret.getBytes(StandardCharsets.UTF_8), "HmacSHA256"));
        byte[] want = ("sha256=" + HexFormat.of().formatHex(mac.doFinal((ts + "." + body).getBytes(StandardCharsets.UTF_8))))
            .getBytes(StandardCharsets.UTF_8);
        return MessageDigest.isEqual(want, sig.getBytes(StandardCharsets.UTF_8));
    }

    private Map<String, Object> handle(Map<String, Object> send) {
        String user = (String) send.get("user");
        if ("/app/chat.send".equals(send.get("destination"))) {
            @SuppressWarnings("unchecked")
            Map<String, Object> data = (Map<String, Object>) send.get("data");
            return Map.of("publish", List.of(
                // @SendTo("/topic/public")
                Map.of("topic", "public", "type", "CHAT", "data", Map.of("from", user, "text", data.get("text"))),
                // convertAndSendToUser(user, "/queue/acks", ...)
                Map.of("topic", "user/" + user + "/queue/acks", "data", Map.of("ack", send.get("request_id")))));
        }
        return Map.of("error", Map.of("reason", "no handler for " + send.get("destination")));
    }

    /** Mints the token a client gives rtlab in CONNECT (passcode): HS256, sub and exp. */
    @GetMapping("/token/{user}")
    public Map<String, String> token(@PathVariable String user) {
        String jwt = Jwts.builder().subject(user)
            .expiration(Date.from(Instant.now().plus(Duration.ofHours(1))))
            .signWith(key, Jwts.SIG.HS256).compact();
        return Map.of("token", jwt);
    }

    /** SimpMessagingTemplate.convertAndSendToUser becomes a server API call. */
    @PostMapping("/notify/{user}")
    public String notifyUser(@PathVariable String user, @RequestBody Map<String, Object> data) throws Exception {
        String body = json.writeValueAsString(Map.of("topic", "user/" + user + "/queue/notify", "data", data));
        HttpRequest req = HttpRequest.newBuilder(URI.create(rtlab + "/api/server/publish"))
            .header("Authorization", "apikey " + apiKey).header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body)).build();
        return http.send(req, HttpResponse.BodyHandlers.ofString()).body();
    }
}
