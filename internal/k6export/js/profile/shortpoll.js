// The profile's shortpoll users (poll.js).
import { options as opts } from './lib.js';
import { P } from './profile.js';
import { pollUser } from './poll.js';

export const options = opts();

export default async function () {
  await pollUser(P.transports.shortpoll, false);
}
