import { en, type Catalog } from "./en";

export const es: Catalog = { ...en };
