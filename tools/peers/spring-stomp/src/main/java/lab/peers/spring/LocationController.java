package lab.peers.spring;

import com.fasterxml.jackson.databind.JsonNode;
import org.springframework.messaging.handler.annotation.DestinationVariable;
import org.springframework.messaging.handler.annotation.MessageMapping;
import org.springframework.messaging.handler.annotation.Payload;
import org.springframework.messaging.handler.annotation.SendTo;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;

/** Relays a group member's position to the group, as the seeds' location servers did. */
@RestController
public class LocationController {

    /**
     * Read as JSON and written back, as a handler with a position type would; the lab reads its
     * own fields (sender, sequence, send time) back from it.
     */
    @MessageMapping("/location/{group}")
    @SendTo("/sub/location/{group}")
    public JsonNode share(@DestinationVariable String group, @Payload JsonNode position) {
        return position;
    }

    /** Answers once the application context is up, so the lab knows when to start. */
    @GetMapping("/readyz")
    public String ready() {
        return "ok";
    }
}
