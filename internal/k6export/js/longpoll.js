// The bench's location users over long polling: read the topic's position, then GET
// /api/poll/{topic}?since=&wait= in a loop; publish with POST /api/publish/{topic}.
import { options as opts, pollUser } from './lib.js';

export const options = opts();

export default async function () {
  await pollUser(true);
}
