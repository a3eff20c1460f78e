package lab.peers.spring;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;

/**
 * A minimal Spring Boot STOMP server with the simple (in-process) broker, set up the way the seed
 * projects ran it: clients connect to the WebSocket endpoint {@code /location}, SEND to
 * {@code /pub/location/{group}} and SUBSCRIBE to {@code /sub/location/{group}}.
 */
@SpringBootApplication
public class SpringStompApplication {
    public static void main(String[] args) {
        SpringApplication.run(SpringStompApplication.class, args);
    }
}
