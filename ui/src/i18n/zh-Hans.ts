import { en, type Catalog } from "./en";

export const zhHans: Catalog = { ...en };
