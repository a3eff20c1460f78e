package results

// The servers the lab measures. rtlab is the one it was built for; the others are what a team
// would pick instead, started fresh by the lab and driven with the same scenario, the same
// payload and the same accounting, so their rows sit beside rtlab's in one report.
const (
	KindRTLab      = "rtlab"
	KindCentrifugo = "centrifugo" // Centrifugo: its JSON WebSocket protocol, and unidirectional SSE
	KindRabbitMQ   = "rabbitmq"   // RabbitMQ's Web-STOMP plugin: STOMP over WebSocket on amq.topic
	KindSpring     = "spring"     // Spring Boot's STOMP endpoint with the simple broker (tools/peers/spring-stomp)
	KindSTOMP      = "stomp"      // --target-kind only: any STOMP-over-WebSocket server
)

// KindLabel is a server kind as a reader says it.
func KindLabel(kind string) string {
	switch kind {
	case KindCentrifugo:
		return "Centrifugo"
	case KindRabbitMQ:
		return "RabbitMQ"
	case KindSpring:
		return "Spring"
	case KindSTOMP:
		return "target"
	}
	return kind
}
